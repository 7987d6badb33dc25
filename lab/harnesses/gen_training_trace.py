#!/usr/bin/env python3
"""vrambench tools - a synthetic training-loop trace (vbtrace 1), to judge
allocators on a layered workload that no recorded trace covers: `layers`
layers of random widths (1, 2, 4 or 8 x base MiB), weights and gradients
held, and per step a forward pass (per layer: a workspace 1.5 x the layer's
activation, freed at once, the saved activation, three small blocks of
512 B-64 KiB freed with the workspace) and a backward pass (per layer, in
reverse: the incoming gradient, a half-size temporary, then the previous
gradient, the temporary and the saved activation freed). With --vary V the
batch, and so every activation, is scaled per step by a factor drawn
uniformly from [1 - V, 1 + V] (dynamic shapes); with 0 every step is alike.

    lab/harnesses/gen_training_trace.py --seed 31 --layers 40 --steps 12 --base-mb 24 --vary 0.4 -o OUT.trace.gz

Seeded: the same arguments give the same file. One stream (0).
"""
import argparse
import gzip
import random
import sys

MiB = 1 << 20


def generate(seed, layers, steps, base_mb, vary):
    """The trace's lines (without the header)."""
    rng = random.Random(seed)
    lines = []
    next_id = [0]

    def alloc(size):
        block = next_id[0]
        next_id[0] += 1
        lines.append(f"a {block} {max(1, int(size))} 0")
        return block

    def free(block):
        lines.append(f"f {block} 0")

    widths = [rng.choice([1, 2, 4, 8]) * base_mb * MiB for _ in range(layers)]
    for width in widths:
        alloc(width / 8)  # weights, held throughout
    gradients = None
    for _ in range(steps):
        batch = rng.uniform(1 - vary, 1 + vary)
        saved = []
        for width in widths:
            workspace = alloc(width * batch * 1.5)
            saved.append(alloc(width * batch))
            small = [alloc(rng.randint(512, 65536)) for _ in range(3)]
            free(workspace)
            for block in small:
                free(block)
        loss = alloc(4096)
        if gradients is None:
            gradients = [alloc(width / 8) for width in widths]  # weight gradients, held from the first step
        incoming = alloc(widths[-1] * batch)
        for layer in reversed(range(layers)):
            outgoing = alloc(widths[layer] * batch)
            temporary = alloc(widths[layer] * batch * 0.5)
            free(temporary)
            free(incoming)
            free(saved[layer])
            incoming = outgoing
        free(incoming)
        free(loss)
    return lines


def main(argv):
    parser = argparse.ArgumentParser(description="synthetic training-loop trace")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--layers", type=int, required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--base-mb", type=float, required=True)
    parser.add_argument("--vary", type=float, default=0.0)
    parser.add_argument("-o", dest="out", required=True)
    args = parser.parse_args(argv[1:])
    if args.layers < 1 or args.steps < 1 or args.base_mb <= 0 or not 0 <= args.vary < 1:
        print("gen_training_trace.py: error: --layers and --steps must be >= 1, --base-mb > 0, --vary in [0, 1)",
              file=sys.stderr)
        return 2
    lines = generate(args.seed, args.layers, args.steps, args.base_mb, args.vary)
    text = ("vbtrace 1\n" + "\n".join(lines) + "\n").encode()
    if args.out.endswith(".gz"):
        text = gzip.compress(text, mtime=0)  # no time stamp: the same arguments give the same bytes
    with open(args.out, "wb") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
