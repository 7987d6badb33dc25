#!/usr/bin/env python3
"""The plug-in under DistributedDataParallel (issue 25): one process per GPU
over NCCL, a small transformer trained 20 steps of varying sequence length,
for native PyTorch and every vrambench strategy (GPU; PyTorch; `make plugin`
first).

Each allocator runs in a fresh process group: a child process spawns one
worker per rank (torch.multiprocessing, start method spawn: fresh
interpreters), and each worker calls vrambench.plugin.use() first, then
torch.cuda.set_device(rank) (the order use() needs: python/vrambench/plugin.py),
then init_process_group("nccl"). The model: token embedding, a 2-layer
nn.TransformerEncoder (d_model 256, 4 heads, no dropout), a linear head over
a 1000-token vocabulary; AdamW; batch 8 per rank of sequences 32 to 127
tokens long, different every step (seeded by step and rank). Deterministic
settings (seeds, use_deterministic_algorithms(warn_only=True),
CUBLAS_WORKSPACE_CONFIG, TF32 off). The loss of each step is averaged over
the ranks (all_reduce) and recorded with its bytes.

NCCL_NVLS_ENABLE=0 (NVLink multicast off) unless set otherwise;
TORCH_NCCL_AVOID_RECORD_STREAMS=1 for every allocator, native included:
PyTorch drops record_stream under a pluggable allocator (README, "PyTorch
plug-in"), so the process group must hold its tensors until NCCL is done
with them instead of recording its stream on them.

Per allocator: the per-step losses, loss_matches_native (every step's loss
bit for bit equal to native PyTorch's) and the largest relative difference,
peak reserved bytes per rank (the plug-in's statistics; PyTorch's own for
native), median step time per rank.

  python3 lab/harnesses/ddp_plugin.py [--out FILE] [--allocators pytorch,async,...] [--ranks 2]

Output: JSON {"context", "results": [...]}, default
results/ddp-plugin-{device}-{date}.json. With fewer GPUs than ranks it
writes a result saying it was skipped, prints a note and exits 0. Exit 1
when any allocator failed or its losses differ from native.
"""
import argparse
import json
import os
import socket
import statistics
import struct
import sys
import tempfile
import time

from multi_gpu_plugin import ROOT, gpu_context, output_path, run_child, strategies, write

STEPS = 20
BATCH = 8
VOCAB = 1000
D_MODEL = 256
CHILD_TIMEOUT_S = 300


def worker(rank, world, allocator, library, port, parts):
    """One rank: the plug-in first, then the device, then NCCL; writes its part."""
    if allocator != "pytorch":
        sys.path.insert(0, os.path.join(ROOT, "python"))
        from vrambench import plugin
        plugin.use(allocator, library)
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    torch.cuda.set_device(rank)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.use_deterministic_algorithms(True, warn_only=True)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    device = torch.device("cuda", rank)
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(D_MODEL, 4, dim_feedforward=4 * D_MODEL, dropout=0.0, batch_first=True)
    model = torch.nn.Sequential(torch.nn.Embedding(VOCAB, D_MODEL), torch.nn.TransformerEncoder(layer, 2),
                                torch.nn.Linear(D_MODEL, VOCAB)).to(device)
    model = DistributedDataParallel(model, device_ids=[rank])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses, times = [], []
    for step in range(STEPS):
        generator = torch.Generator().manual_seed(1000 * step + rank)
        length = 32 + (step * 37) % 96
        tokens = torch.randint(0, VOCAB, (BATCH, length + 1), generator=generator).to(device)
        torch.cuda.synchronize()
        started = time.perf_counter_ns()
        logits = model(tokens[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        mean /= world
        torch.cuda.synchronize()
        times.append(time.perf_counter_ns() - started)
        losses.append(mean.item())
        del logits, loss, tokens
    stats = torch.cuda.memory_stats(rank)  # the plug-in's under the same names when patched
    part = {"rank": rank, "losses": losses, "losses_hex": [struct.pack(">d", x).hex() for x in losses],
            "peak_reserved_bytes": stats.get("reserved_bytes.all.peak"),
            "peak_allocated_bytes": stats.get("allocated_bytes.all.peak"),
            "step_ns_median": statistics.median(times)}
    with open(os.path.join(parts, f"rank{rank}.json"), "w") as f:
        json.dump(part, f)
    dist.barrier()
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child(allocator, library, ranks):
    """Spawns the ranks under one allocator; prints the gathered JSON."""
    import torch.multiprocessing as mp
    with tempfile.TemporaryDirectory() as parts:
        mp.spawn(worker, args=(ranks, allocator, library, free_port(), parts), nprocs=ranks, join=True)
        ranks_data = []
        for rank in range(ranks):
            with open(os.path.join(parts, f"rank{rank}.json")) as f:
                ranks_data.append(json.load(f))
    print(json.dumps({"allocator": allocator, "ranks": ranks_data, "losses": ranks_data[0]["losses"],
                      "losses_hex": ranks_data[0]["losses_hex"],
                      "peak_reserved_bytes": [r["peak_reserved_bytes"] for r in ranks_data],
                      "step_ns_median": [r["step_ns_median"] for r in ranks_data]}), flush=True)


def compare(result, native):
    """Marks `result` against native PyTorch's losses."""
    if "error" in result:
        result["ok"] = False
        return
    if not native:
        result["ok"] = True
        return
    result["loss_matches_native"] = result["losses_hex"] == native["losses_hex"]
    result["loss_max_rel_diff"] = max(abs(a - b) / abs(b) if b else abs(a - b)
                                      for a, b in zip(result["losses"], native["losses"]))
    result["ok"] = result["loss_matches_native"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", help="JSON to write, {device} and {date} expanded "
                        "(default results/ddp-plugin-{device}-{date}.json)")
    parser.add_argument("--allocators", default="all", help="pytorch,async,... or all")
    parser.add_argument("--ranks", type=int, default=2, help="processes, one per GPU (default 2)")
    parser.add_argument("--plugin", help="the plug-in library (default build/libvrambench_torch.so)")
    parser.add_argument("--child", metavar="ALLOCATOR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ranks < 2:
        parser.error("--ranks must be 2 or more")
    if args.child:
        child(args.child, args.plugin, args.ranks)
        return 0
    context = gpu_context("lab/harnesses/ddp_plugin.py")
    context.update(ranks=args.ranks, steps=STEPS, batch_per_rank=BATCH)
    out = output_path(args.out, context, "ddp-plugin-{device}-{date}.json")
    if context["devices"] < args.ranks:
        write(out, {"context": context, "results": [],
                    "skipped": f"{context['devices']} GPU: {args.ranks} ranks need as many"})
        print(f"ddp_plugin: skipped: this machine has {context['devices']} GPU, {args.ranks} ranks need as many "
              f"(wrote {out})", file=sys.stderr)
        return 0
    env = dict(os.environ, CUBLAS_WORKSPACE_CONFIG=":4096:8", PYTHONHASHSEED="0", TORCH_NCCL_AVOID_RECORD_STREAMS="1")
    env.setdefault("NCCL_NVLS_ENABLE", "0")
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    context.update(NCCL_NVLS_ENABLE=env["NCCL_NVLS_ENABLE"], TORCH_NCCL_AVOID_RECORD_STREAMS="1")
    allocators = ["pytorch"] + strategies() if args.allocators == "all" else args.allocators.split(",")
    results = []
    for allocator in allocators:
        command = [sys.executable, os.path.abspath(__file__), "--child", allocator, "--ranks", str(args.ranks)]
        command += ["--plugin", args.plugin] if args.plugin else []
        result = run_child(command, env, CHILD_TIMEOUT_S)
        result.setdefault("allocator", allocator)
        results.append(result)
    native = next((r for r in results if r["allocator"] == "pytorch" and "error" not in r), None)
    for result in results:
        compare(result, native)
        summary = result.get("error") or (
            f"final loss {result['losses'][-1]:.6f}, losses equal to native: {result.get('loss_matches_native')}, "
            f"peak reserved MiB per rank {[round((b or 0) / 2**20, 1) for b in result['peak_reserved_bytes']]}")
        print(f"ddp_plugin: {result['allocator']}: {'ok' if result['ok'] else 'FAILED'}: {summary}",
              file=sys.stderr, flush=True)
    write(out, {"context": context, "results": results})
    print(f"ddp_plugin: wrote {out}", file=sys.stderr)
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
