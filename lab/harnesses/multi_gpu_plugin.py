#!/usr/bin/env python3
"""The plug-in on several GPUs in one process (issue 25): copies between
devices both ways and matmuls whose operands crossed devices, checked
against the CPU, for native PyTorch and every vrambench strategy (GPU;
PyTorch; `make plugin` first).

Each allocator runs in a fresh Python process, so the plug-in is installed
before the first CUDA call. For every ordered pair of GPUs (a, b), any
number of them:
  copies    tensors of 1 KiB to 96 MiB made on the CPU (seeded), moved to a,
            to b (x.to("cuda:b")) and back to a, and copied into a tensor
            already on b (y.copy_(x)); each must come back bit for bit, and
            the source on a is deleted once copied (freed on the other side
            from where its data lives on);
  matmul    C = A @ B on a, moved to b, D = C @ B there, all float32 with
            TF32 off: D against the CPU's (A @ B) @ B (max relative error,
            tolerance MATMUL_RTOL), and its bytes against native PyTorch's
            (matches_native).
Before the copies each device has allocated and freed blocks of several
sizes, so memory that grew, was cached and handed out again crosses too.
Per allocator: ok, the checks per pair, peak reserved bytes per device (the
plug-in's statistics; torch.cuda.memory_stats for native), and the error of
a child that failed (on the issue's machine: "CUDA error: invalid argument"
at the first copy for async, expandable and stitch).

  python3 lab/harnesses/multi_gpu_plugin.py [--out FILE] [--allocators pytorch,async,...]

Output: JSON {"context", "results": [...]}, default
results/multi-gpu-plugin-{device}-{date}.json. With fewer than two GPUs it
writes a result saying it was skipped, prints a note and exits 0. Exit 1
when any allocator failed a check.
"""
import argparse
import datetime
import hashlib
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))

STRATEGIES = ["cuda", "caching", "async", "expandable", "bfc", "buddy", "binning", "stitch"]
COPY_BYTES = [1024, 64 * 1024, 2 * 2**20, 20 * 2**20 + 4096, 96 * 2**20]
GROWTH_BYTES = [512, 3 * 2**20, 24 * 2**20, 70 * 2**20]
MATMUL_N = 1024
MATMUL_RTOL = 1e-4
CHILD_TIMEOUT_S = 240


def child(allocator, library):
    """Runs the checks under one allocator; prints its JSON on the last line."""
    if allocator != "pytorch":
        from vrambench import plugin
        plugin.use(allocator, library)
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    devices = list(range(torch.cuda.device_count()))
    generator = torch.Generator().manual_seed(25)
    # Memory that grew, was cached and is handed out again.
    for d in devices:
        held = [torch.empty(n, dtype=torch.uint8, device=f"cuda:{d}") for n in GROWTH_BYTES]
        del held[1], held[0]
        held.append(torch.empty(GROWTH_BYTES[1] // 2, dtype=torch.uint8, device=f"cuda:{d}"))
        del held
    pairs = []
    a_cpu = torch.randn(MATMUL_N, MATMUL_N, generator=generator)
    b_cpu = torch.randn(MATMUL_N, MATMUL_N, generator=generator)
    expected = (a_cpu.double() @ b_cpu.double()) @ b_cpu.double()
    for a in devices:
        for b in devices:
            if a == b:
                continue
            check = {"from": a, "to": b, "copies_exact": True, "copy_failures": []}
            for n in COPY_BYTES:
                source = torch.randint(0, 256, (n,), dtype=torch.uint8, generator=generator)
                on_a = source.to(f"cuda:{a}")
                on_b = on_a.to(f"cuda:{b}")
                del on_a  # freed on a; its data lives on in on_b
                back = on_b.to(f"cuda:{a}")
                into = torch.empty(n, dtype=torch.uint8, device=f"cuda:{b}")
                into.copy_(back)
                for what, tensor in (("a->b", on_b), ("b->a", back), ("copy_ into b", into)):
                    if not torch.equal(tensor.cpu(), source):
                        check["copies_exact"] = False
                        check["copy_failures"].append(f"{what}, {n} bytes")
                del on_b, back, into
            c = a_cpu.to(f"cuda:{a}") @ b_cpu.to(f"cuda:{a}")
            d_on_b = c.to(f"cuda:{b}") @ b_cpu.to(f"cuda:{b}")
            del c
            result = d_on_b.cpu()
            error = ((result.double() - expected).abs().max() / expected.abs().max()).item()
            check["matmul_max_rel_error"] = error
            check["matmul_within_tolerance"] = error <= MATMUL_RTOL
            check["matmul_sha256"] = hashlib.sha256(result.numpy().tobytes()).hexdigest()
            check["ok"] = check["copies_exact"] and check["matmul_within_tolerance"]
            pairs.append(check)
    torch.cuda.synchronize()
    peaks = [torch.cuda.memory_stats(d).get("reserved_bytes.all.peak") for d in devices]
    print(json.dumps({"allocator": allocator, "devices": len(devices), "pairs": pairs,
                      "peak_reserved_bytes": peaks, "ok": all(p["ok"] for p in pairs)}), flush=True)


def strategies():
    """The vrambench strategies, from the built binary when there is one."""
    try:
        listing = subprocess.run([os.path.join(ROOT, "build", "vrambench"), "list", "allocators"],
                                 capture_output=True, text=True, timeout=30).stdout
        names = [line.split()[0] for line in listing.splitlines()
                 if line and not line[0].isspace() and not line.startswith("external:")]
        return names or STRATEGIES
    except OSError:
        return STRATEGIES


def gpu_context(executable):
    """What the machine is, from a process of its own (the parent stays off CUDA)."""
    probe = ("import json, torch; n = torch.cuda.device_count(); "
             "print(json.dumps({'devices': n, 'names': [torch.cuda.get_device_name(i) for i in range(n)], "
             "'torch_version': torch.__version__, 'cuda_version': torch.version.cuda}))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise SystemExit(f"{executable}: error: cannot ask PyTorch for the GPUs: "
                         f"{(done.stderr.strip().splitlines() or ['no output'])[-1]}")
    info = json.loads(done.stdout.strip().splitlines()[-1])
    info.update(date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                executable=executable)
    return info


def output_path(pattern, context, default_name):
    """--out with {device} and {date} expanded."""
    device = (context["names"] or ["no-gpu"])[0]
    slug = "".join(c if c.isalnum() else "-" for c in device.lower()).strip("-").replace("--", "-")
    out = pattern or os.path.join(ROOT, "results", default_name)
    return out.replace("{device}", f"{context['devices']}x-{slug}").replace(
        "{date}", f"{datetime.datetime.now(datetime.timezone.utc):%Y%m%d}")


def write(out, document):
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out + ".tmp", "w") as f:
        json.dump(document, f, indent=1)
    os.replace(out + ".tmp", out)


def run_child(command, env, timeout):
    """The JSON a child printed last, or {"error": ...}."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    lines = done.stdout.strip().splitlines()
    if done.returncode == 0 and lines:
        try:
            return json.loads(lines[-1])
        except ValueError:
            pass
    errors = [line for line in done.stderr.splitlines() if "error" in line.lower()]
    tail = (errors or done.stderr.strip().splitlines() or ["no output"])[-1]
    return {"error": f"exit {done.returncode}: {tail}"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", help="JSON to write, {device} and {date} expanded "
                        "(default results/multi-gpu-plugin-{device}-{date}.json)")
    parser.add_argument("--allocators", default="all", help="pytorch,async,... or all")
    parser.add_argument("--plugin", help="the plug-in library (default build/libvrambench_torch.so)")
    parser.add_argument("--child", metavar="ALLOCATOR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.plugin)
        return 0
    context = gpu_context("lab/harnesses/multi_gpu_plugin.py")
    out = output_path(args.out, context, "multi-gpu-plugin-{device}-{date}.json")
    if context["devices"] < 2:
        write(out, {"context": context, "skipped": f"{context['devices']} GPU: copies between devices need two",
                    "results": []})
        print(f"multi_gpu_plugin: skipped: this machine has {context['devices']} GPU (wrote {out})", file=sys.stderr)
        return 0
    allocators = ["pytorch"] + strategies() if args.allocators == "all" else args.allocators.split(",")
    env = dict(os.environ)
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    results = []
    for allocator in allocators:
        command = [sys.executable, os.path.abspath(__file__), "--child", allocator]
        command += ["--plugin", args.plugin] if args.plugin else []
        result = run_child(command, env, CHILD_TIMEOUT_S)
        result.setdefault("allocator", allocator)
        result.setdefault("ok", False)
        results.append(result)
    native = next((r for r in results if r["allocator"] == "pytorch" and "error" not in r), None)
    for result in results:
        if native and "pairs" in result:
            for check, reference in zip(result["pairs"], native["pairs"]):
                check["matches_native"] = check["matmul_sha256"] == reference["matmul_sha256"]
        summary = result.get("error") or (
            f"{len(result['pairs'])} pairs, copies {'exact' if all(p['copies_exact'] for p in result['pairs']) else 'WRONG'}, "
            f"matmul max rel error {max(p['matmul_max_rel_error'] for p in result['pairs']):.2e}, "
            f"same bytes as native: {all(p.get('matches_native', False) for p in result['pairs'])}, "
            f"peak reserved MiB {[round((b or 0) / 2**20, 1) for b in result['peak_reserved_bytes']]}")
        print(f"multi_gpu_plugin: {result['allocator']}: {'ok' if result['ok'] else 'FAILED'}: {summary}",
              file=sys.stderr, flush=True)
    write(out, {"context": context, "matmul_rtol": MATMUL_RTOL, "results": results})
    print(f"multi_gpu_plugin: wrote {out}", file=sys.stderr)
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
