#!/usr/bin/env python3
"""Records the documents' own code under PyTorch's native CUDA allocator.

For each claim scenario, a fresh Python process (so the allocator starts
empty) runs the code of the document the claim comes from and samples, at the
same named steps as vrambench's scenario of that name:
  requested   torch.cuda.memory_stats()["requested_bytes.all.current"]
  allocated   torch.cuda.memory_allocated()
  reserved    torch.cuda.memory_reserved()
  driver_used total - free from torch.cuda.mem_get_info() (cudaMemGetInfo)
plus the scenario's counters. The output is a measurements file:
  {"context": {...}, "measurements": [{"scenario", "allocator": "pytorch",
   "timeline": [...], "counters": {...}}]}
which `vrambench claims --pytorch FILE` decides with the same criteria as
every other allocator (harness/claims.c), so no criterion is written twice.

Usage (on a GPU machine with PyTorch):  python3 tools/pytorch_claims.py OUT.json
"""
import argparse
import json
import subprocess
import sys

MiB = 1 << 20


class Recorder:
    """Samples PyTorch's allocator and the driver at named steps."""

    def __init__(self, torch):
        self.torch = torch
        self.timeline = []
        self.counters = {}

    def step(self, name):
        # No synchronize here: a step taken while a kernel runs must see that.
        stats = self.torch.cuda.memory_stats()
        free, total = self.torch.cuda.mem_get_info()
        self.timeline.append({
            "step": name,
            "requested": stats.get("requested_bytes.all.current", 0),
            "allocated": stats.get("allocated_bytes.all.current", 0),
            "reserved": stats.get("reserved_bytes.all.current", 0),
            "driver_used": total - free,
        })

    def counter(self, name, value):
        self.counters[name] = float(value)


# ---------------------------------------------------------------------------
# Scenarios: the documents' code, with vrambench's step names
# ---------------------------------------------------------------------------

def release_specific(torch, r):
    """000 Example 1 and 004: del x + empty_cache; a small tensor with a live neighbour."""
    device = "cuda"
    r.counter("large_tensor_bytes", 1000 * 1000 * 4)
    r.counter("small_tensor_bytes", 100 * 100 * 4)
    r.step("start")
    x = torch.randn(1000, 1000, device=device)
    r.step("x=randn(1000,1000)")
    del x
    r.step("del x")
    torch.cuda.empty_cache()
    r.step("empty_cache")
    small = torch.randn(100, 100, device=device)
    neighbour = torch.randn(100, 100, device=device)
    r.step("small,neighbour=randn(100,100)")
    del small
    r.step("del small")
    torch.cuda.empty_cache()
    r.step("empty_cache (neighbour alive)")
    del neighbour
    torch.cuda.empty_cache()
    r.step("del neighbour; empty_cache")


def reuse_after_del(torch, r):
    """004 Example 1: after del a, del b, do new tensors need new memory?"""
    r.counter("tensor_bytes", 1000 * 1000 * 4)
    r.step("start")
    a = torch.randn(1000, 1000, device="cuda")
    b = torch.randn(1000, 1000, device="cuda")
    c = a + b
    r.step("a,b=randn; c=a+b")
    del a
    del b
    r.step("del a; del b")
    d = torch.randn(1000, 1000, device="cuda")
    e = torch.randn(1000, 1000, device="cuda")
    r.step("d,e=randn (no empty_cache)")
    del c, d, e
    torch.cuda.empty_cache()
    r.step("end; empty_cache")


def leak_loop(torch, r):
    """004's process_data() 100 times with results dropped, then kept."""
    def process_data(i):
        rows = 1000 + 250 * (i % 4)
        a = torch.randn(rows, 1000, device="cuda")
        b = torch.randn(rows, 1000, device="cuda")
        c = a + b
        del a
        del b
        return c

    r.counter("iterations", 100)
    r.counter("largest_tensor_bytes", 1750 * 1000 * 4)
    r.step("start")
    for i in range(100):
        result = process_data(i)
        del result
        if (i + 1) % 10 == 0:
            r.step(f"unreferenced {i + 1}")
    results = []
    for i in range(100):
        results.append(process_data(i))
        if (i + 1) % 10 == 0:
            r.step(f"kept {i + 1}")
    del results
    torch.cuda.empty_cache()
    r.step("del results; empty_cache")


CAP_BYTES = 1 << 30


def take_ballast(torch):
    """Leaves CAP_BYTES of the device free with a raw cudaMalloc outside
    PyTorch's allocator (through CuPy, which shares the primary context)."""
    import cupy
    free, _ = torch.cuda.mem_get_info()
    size = ((free - CAP_BYTES) // (2 * MiB)) * (2 * MiB)
    return cupy.cuda.runtime, cupy.cuda.runtime.malloc(size)


def capped_training(torch, r):
    """003/004: does empty_cache in the training loop avoid OOM? A 4-layer
    1024-wide MLP with Adam, batches B, B/2, B, 3B/4, B, under a 1 GiB cap."""
    runtime, ballast = take_ballast(torch)
    r.counter("cap_bytes", CAP_BYTES)
    r.step("ballast: 1 GiB left free")
    layers = []
    for _ in range(4):
        layers += [torch.nn.Linear(1024, 1024), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers).cuda()
    optimizer = torch.optim.Adam(model.parameters())
    r.step("model, grads, Adam moments")

    def trains(batch, empty_cache_every_step):
        ok = True
        try:
            for quarters in (4, 2, 4, 3, 4):
                data = torch.randn(batch * quarters // 4, 1024, device="cuda")
                loss = model(data).square().mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                del data, loss
                if empty_cache_every_step:
                    torch.cuda.empty_cache()
        except torch.cuda.OutOfMemoryError:
            ok = False
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.empty_cache()
        return ok

    def largest_batch(empty_cache_every_step):
        good, bad = 0, 1024
        while trains(bad, empty_cache_every_step):
            good, bad = bad, bad * 2
        while bad - good > 256:
            middle = good + (bad - good) // 2
            if trains(middle, empty_cache_every_step):
                good = middle
            else:
                bad = middle
        return good

    without = largest_batch(False)
    r.step("search without empty_cache")
    with_cache = largest_batch(True)
    r.step("search with empty_cache")
    common = min(without, with_cache)
    peaks = {}
    for flag in (False, True):
        torch.cuda.reset_peak_memory_stats()
        peaks[flag] = torch.cuda.max_memory_reserved() if common and trains(common, flag) else 0
    r.counter("max_batch_without_empty_cache", without)
    r.counter("max_batch_with_empty_cache", with_cache)
    r.counter("common_batch", common)
    r.counter("peak_reserved_without_empty_cache", peaks[False])
    r.counter("peak_reserved_with_empty_cache", peaks[True])
    del model, optimizer
    torch.cuda.empty_cache()
    runtime.free(ballast)
    r.step("ballast freed")


SCENARIOS = {f.__name__: f for f in (release_specific, reuse_after_del, leak_loop, capped_training)}


# ---------------------------------------------------------------------------
# Driver: one fresh process per scenario
# ---------------------------------------------------------------------------

def run_one(name):
    """Child process: runs one scenario and prints its measurement as JSON."""
    import torch
    torch.cuda.init()
    recorder = Recorder(torch)
    SCENARIOS[name](torch, recorder)
    torch.cuda.synchronize()
    print(json.dumps({"scenario": name, "allocator": "pytorch",
                      "timeline": recorder.timeline, "counters": recorder.counters}))


def context():
    import torch
    props = torch.cuda.get_device_properties(0)
    return {"device_kind": "cuda", "simulated": False, "device_name": props.name,
            "device_total_bytes": props.total_memory, "torch_version": torch.__version__,
            "cuda_version": torch.version.cuda, "allocator": "pytorch (native CUDACachingAllocator)"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", nargs="?", help="measurements JSON to write")
    parser.add_argument("--scenario", help=argparse.SUPPRESS)  # child mode
    args = parser.parse_args()
    if args.scenario:
        run_one(args.scenario)
        return 0
    if not args.out:
        parser.error("the output file is required")
    measurements = []
    for name in SCENARIOS:
        print(f"pytorch_claims: {name}", file=sys.stderr, flush=True)
        child = subprocess.run([sys.executable, __file__, "--scenario", name], capture_output=True, text=True)
        if child.returncode != 0:
            print(f"pytorch_claims: error: scenario {name} failed:\n{child.stderr}", file=sys.stderr)
            return 1
        measurements.append(json.loads(child.stdout.strip().splitlines()[-1]))
    with open(args.out + ".tmp", "w") as out:
        json.dump({"context": context(), "measurements": measurements}, out, indent=1)
    import os
    os.replace(args.out + ".tmp", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
