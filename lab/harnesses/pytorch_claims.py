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
every other allocator (app/claims.c), so no criterion is written twice.

Usage (on a GPU machine with PyTorch):  python3 lab/harnesses/pytorch_claims.py OUT.json
"""
import argparse
import json
import os
import subprocess
import sys

MiB = 1 << 20


# The names vrambench's scenarios define (`vrambench list names --json`,
# committed as docs/names.json): steps are taken by key, counters checked
# against the scenario's tables, so no name is spelled twice.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # lab/harnesses/ is two down
NAMES_JSON = os.path.join(ROOT, "docs", "names.json")
# The counter `vrambench claims` adds on a GPU (app/cmd_claims.c), not a scenario's.
CONTEXT_COUNTER = "context_bytes"


def load_names(path):
    """{scenario: names} of a `vrambench list names --json` file."""
    try:
        with open(path, encoding="utf-8") as stream:
            return json.load(stream)["scenarios"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        sys.exit(f"pytorch_claims: error: {path}: not a `vrambench list names --json` file ({error})")


class Recorder:
    """Samples PyTorch's allocator and the driver at a scenario's named
    steps, and keeps its counters, both by the scenario's names."""

    def __init__(self, torch, names):
        self.torch = torch
        self.names = names
        self.timeline = []
        self.counters = {}
        families = names.get("counter_families", {})
        self.known = set(names["counters"]) | {CONTEXT_COUNTER} | {
            counter for members in families.get("families", {}).values() for counter in members.values()}

    def members(self):
        """[(member name, parameter)] of the scenario's counter families."""
        return [(m["name"], m["parameter"]) for m in self.names["counter_families"]["members"]]

    def step(self, key, *number):
        """Samples at the step `key` of the scenario's table (a numbered one
        formatted with `number`, as the C scenario formats it)."""
        text = self.names["steps"][key]
        name = text % number if number else text
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
        if name not in self.known:
            raise KeyError(f"counter {name!r} is not in the scenario's names")
        self.counters[name] = float(value)

    def family_counter(self, family, member, value):
        """Sets the counter of `family` for `member` (the scenario's table)."""
        self.counter(self.names["counter_families"]["families"][family][member], value)


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
    r.step("large_made")
    del x
    r.step("del_large")
    torch.cuda.empty_cache()
    r.step("emptied")
    small = torch.randn(100, 100, device=device)
    neighbour = torch.randn(100, 100, device=device)
    r.step("small_made")
    del small
    r.step("del_small")
    torch.cuda.empty_cache()
    r.step("emptied_neighbour_alive")
    del neighbour
    torch.cuda.empty_cache()
    r.step("end")


def reuse_after_del(torch, r):
    """004 Example 1: after del a, del b, do new tensors need new memory?"""
    r.counter("tensor_bytes", 1000 * 1000 * 4)
    r.step("start")
    a = torch.randn(1000, 1000, device="cuda")
    b = torch.randn(1000, 1000, device="cuda")
    c = a + b
    r.step("made")
    del a
    del b
    r.step("deleted")
    d = torch.randn(1000, 1000, device="cuda")
    e = torch.randn(1000, 1000, device="cuda")
    r.step("new_tensors")
    del c, d, e
    torch.cuda.empty_cache()
    r.step("end")


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
            r.step("unreferenced", i + 1)
    results = []
    for i in range(100):
        results.append(process_data(i))
        if (i + 1) % 10 == 0:
            r.step("kept", i + 1)
    del results
    torch.cuda.empty_cache()
    r.step("end")


def views(torch, r):
    """000 Example 2: y = x[:] keeps x's storage alive."""
    r.step("start")
    x = torch.randn(1000, 1000, device="cuda")
    y = x[:]
    r.step("made")
    del x
    r.step("del_x")
    del y
    r.step("del_y")
    torch.cuda.empty_cache()
    r.step("emptied")


def async_matmul(torch, r):
    """001 async_gpu_example(): two 10000x10000 matrices, z = x @ y in flight."""
    import time

    def async_gpu_example():
        x = torch.randn(10000, 10000, device="cuda")
        r.step("x_made")
        y = torch.randn(10000, 10000, device="cuda")
        r.step("y_made")
        z = torch.matmul(x, y)
        done = torch.cuda.Event()
        done.record()
        r.counter("kernel_in_flight_at_dispatch", 0 if done.query() else 1)
        r.step("dispatched")
        time.sleep(1)  # the document's "other work"
        torch.cuda.synchronize()
        r.step("synchronized")
        del x, y, z

    torch.cuda.synchronize()
    r.step("start")
    async_gpu_example()
    r.step("returned")
    torch.cuda.empty_cache()
    r.step("emptied")


def holder_refs(torch, r):
    """001 TensorHolder: does result keep the holder's tensor alive?"""
    class TensorHolder:
        def __init__(self, size):
            self.tensor = torch.randn(size, size, device="cuda")

        def compute(self):
            return self.tensor * 2

    r.step("start")
    tensor_holder = TensorHolder(10000)
    r.step("holder_made")
    result = tensor_holder.compute()
    r.step("computed")
    before = torch.cuda.memory_stats()["requested_bytes.all.current"]
    tensor_holder = None
    r.step("holder_none")
    after = torch.cuda.memory_stats()["requested_bytes.all.current"]
    r.counter("freed_at_holder_none_bytes", before - after)
    r.counter("held_by_result_bytes", after)
    result = None
    r.step("result_none")
    torch.cuda.empty_cache()
    r.step("emptied")
    del result


def mlp(torch, widths):
    """Linear layers without bias, ReLU between (the C scenarios' MLP)."""
    layers = []
    for i in range(len(widths) - 1):
        layers.append(torch.nn.Linear(widths[i], widths[i + 1], bias=False))
        if i + 2 < len(widths):
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers).cuda()


def training_step(torch, data, model, optimizer):
    """004 Example 2's training_step."""
    output = model(data)
    loss = torch.nn.functional.mse_loss(output, torch.randn_like(output))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def training_cleanup(torch, r):
    """002 Examples 1 and 2 after a short training run."""
    import gc
    torch.cuda.synchronize()
    r.step("start")
    start_driver = r.timeline[-1]["driver_used"]
    model = mlp(torch, [1024, 4096, 4096, 1000])
    optimizer = torch.optim.Adam(model.parameters())
    r.step("model")
    train_dataset = torch.utils.data.TensorDataset(torch.randn(16384, 1024, device="cuda"),
                                                   torch.randint(0, 1000, (16384,), device="cuda"))
    test_dataset = torch.utils.data.TensorDataset(torch.randn(4096, 1024, device="cuda"),
                                                  torch.randint(0, 1000, (4096,), device="cuda"))
    train_loader = torch.utils.data.DataLoader(train_dataset, batch_size=256)
    test_loader = torch.utils.data.DataLoader(test_dataset, batch_size=256)
    r.step("datasets")
    for step, (data, _) in enumerate(train_loader):
        training_step(torch, data, model, optimizer)
        if step == 3:
            break
    del data
    r.step("trained")
    with torch.no_grad():
        some_large_tensor = model(test_dataset.tensors[0])
    r.step("large_tensor")
    del model
    r.step("del_model")
    del optimizer
    r.step("del_optimizer")
    if "some_large_tensor" in locals():
        del some_large_tensor
    r.step("del_large_tensor")
    gc.collect()
    r.step("gc")
    torch.cuda.empty_cache()
    r.step("emptied")
    del train_dataset
    r.step("del_train_dataset")
    del test_dataset
    r.step("del_test_dataset")
    del train_loader
    r.step("del_train_loader")
    del test_loader
    r.step("del_test_loader")
    gc.collect()
    r.step("gc_2")
    torch.cuda.empty_cache()
    r.step("emptied_2")
    end = r.timeline[-1]
    r.counter("residual_driver_bytes", end["driver_used"] - start_driver)
    r.counter("residual_reserved_bytes", end["reserved"])
    r.counter("requested_after_cleanup_bytes", end["requested"])


def no_grad_inference(torch, r):
    """003 Example 2, scaled up: a no_grad forward against a training step."""
    def phase(peak_requested, peak_reserved, extra_peak, body):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_stats()["requested_bytes.all.current"]
        body()
        stats = torch.cuda.memory_stats()
        r.counter(peak_requested, stats["requested_bytes.all.peak"])
        r.counter(peak_reserved, stats["reserved_bytes.all.peak"])
        r.counter(extra_peak, stats["requested_bytes.all.peak"] - before)

    r.step("start")
    model = mlp(torch, [1000, 4096, 4096, 4096, 10])
    r.step("model")
    input_tensor = torch.randn(4096, 1000, device="cuda")
    r.step("input")

    def inference():
        with torch.no_grad():
            output = model(input_tensor)
        r.step("no_grad_forward")
        del output
        r.step("del_output")

    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    phase("no_grad_peak_requested_bytes", "no_grad_peak_reserved_bytes", "no_grad_extra_peak_bytes", inference)
    phase("train_peak_requested_bytes", "train_peak_reserved_bytes", "train_extra_peak_bytes",
          lambda: training_step(torch, input_tensor, model, optimizer))
    r.step("trained")
    del model, optimizer, input_tensor
    r.step("end")


def dataloader_batches(torch, r):
    """003 Example 3: pinned batches to the GPU, a training step, a batch-size sweep."""
    import time
    data = torch.randn(10000, 100)
    labels = torch.randint(0, 10, (10000,))
    dataset = torch.utils.data.TensorDataset(data, labels)
    model = mlp(torch, [100, 512, 512, 10])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    r.step("start")
    r.step("model")
    for member, batch_size in r.members():
        loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True, pin_memory=True)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        started, batches = time.perf_counter_ns(), 0
        for batch, target in loader:
            batch, target = batch.cuda(non_blocking=True), target.cuda(non_blocking=True)
            training_step(torch, batch, model, optimizer)
            del batch
            del target
            torch.cuda.empty_cache()
            batches += 1
        torch.cuda.synchronize()
        stats = torch.cuda.memory_stats()
        r.family_counter("peak_reserved_bytes", member, stats["reserved_bytes.all.peak"])
        r.family_counter("peak_requested_bytes", member, stats["requested_bytes.all.peak"])
        r.family_counter("batch_ns", member, (time.perf_counter_ns() - started) / batches)
        r.step("epoch_done", member)
    del model, optimizer
    r.step("end")


def empty_cache_loop(torch, r):
    """004 Example 3's loop and 003's training loop, empty_cache every 1 / 10 / never."""
    import time
    data = torch.randn(10000, 100).pin_memory()
    labels = torch.randint(0, 10, (10000,)).pin_memory()
    r.step("start")

    def driver_calls():
        stats = torch.cuda.memory_stats()
        return stats.get("num_device_alloc", 0) + stats.get("num_device_free", 0)

    for member, every in r.members():  # empty_cache every N iterations (0: never)
        model = mlp(torch, [100, 512, 512, 10])
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        torch.cuda.empty_cache()
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        calls, started = driver_calls(), time.perf_counter_ns()
        results = []
        for i in range(100):  # perform_multiple_ops(100)
            temp_tensor = torch.randn(100, 100, device="cuda")
            results.append(torch.sum(temp_tensor).item())
            del temp_tensor
            if every and (i + 1) % every == 0:
                torch.cuda.empty_cache()
        for i in range(100):  # 003's loop, batch_size=32
            batch = data[32 * i:32 * (i + 1)].cuda()
            target = labels[32 * i:32 * (i + 1)].cuda()
            training_step(torch, batch, model, optimizer)
            del batch
            del target
            if every and (i + 1) % every == 0:
                torch.cuda.empty_cache()
        torch.cuda.synchronize()
        r.family_counter("iter_ns", member, (time.perf_counter_ns() - started) / 200)
        r.family_counter("driver_calls", member, driver_calls() - calls)
        r.family_counter("peak_reserved_bytes", member, torch.cuda.max_memory_reserved())
        del model, optimizer
    torch.cuda.empty_cache()
    r.step("emptied")


CAP_BYTES = 1 << 30


def cap_memory(torch, cap_bytes):
    """Caps PyTorch's allocator at cap_bytes with set_per_process_memory_fraction
    (the allocator refuses to reserve past fraction x total memory), as the
    capped device of base/device_cap.c caps vrambench's: the same cap on
    every GPU, whatever else the device holds. None lifts it."""
    if cap_bytes is None:
        torch.cuda.set_per_process_memory_fraction(1.0)
        return
    total = torch.cuda.get_device_properties(0).total_memory
    # PyTorch truncates fraction x total to bytes: half a byte over keeps the cap whole.
    torch.cuda.set_per_process_memory_fraction((cap_bytes + 0.5) / total)


def capped_training(torch, r):
    """003/004: does empty_cache in the training loop avoid OOM? A 4-layer
    1024-wide MLP with Adam, batches B, B/2, B, 3B/4, B, under a 1 GiB cap."""
    cap_memory(torch, CAP_BYTES)
    r.counter("cap_bytes", CAP_BYTES)
    r.step("capped")
    layers = []
    for _ in range(4):
        layers += [torch.nn.Linear(1024, 1024), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers).cuda()
    optimizer = torch.optim.Adam(model.parameters())
    r.step("model")

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
    r.step("searched_without")
    with_cache = largest_batch(True)
    r.step("searched_with")
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
    cap_memory(torch, None)
    r.step("all_freed")


SCENARIOS = {f.__name__: f for f in (release_specific, views, async_matmul, holder_refs, training_cleanup,
                                     no_grad_inference, dataloader_batches, reuse_after_del, leak_loop,
                                     empty_cache_loop, capped_training)}


# ---------------------------------------------------------------------------
# Driver: one fresh process per scenario
# ---------------------------------------------------------------------------

def nvml_used_bytes():
    """Device memory in use as NVML sees it (None without pynvml): the one
    view that exists before PyTorch creates its CUDA context."""
    try:
        import pynvml
        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0)).used
    except Exception:  # pynvml absent or NVML unusable: the context size stays unknown
        return None


def run_one(name, names):
    """Child process: runs one scenario and prints its measurement as JSON."""
    before_context = nvml_used_bytes()
    import torch
    torch.cuda.init()
    torch.cuda.synchronize()
    after_context = nvml_used_bytes()
    recorder = Recorder(torch, names[name])
    if before_context is not None and after_context is not None:
        recorder.counter("context_bytes", after_context - before_context)
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
    parser.add_argument("--names", default=NAMES_JSON,
                        help="the scenarios' names: `vrambench list names --json` output "
                             "(default: docs/names.json)")
    parser.add_argument("--scenario", help=argparse.SUPPRESS)  # child mode
    args = parser.parse_args()
    names = load_names(args.names)
    missing = [name for name in SCENARIOS if name not in names]
    if missing:
        parser.error(f"{args.names} has no names for {', '.join(missing)}")
    if args.scenario:
        run_one(args.scenario, names)
        return 0
    if not args.out:
        parser.error("the output file is required")
    measurements = []
    for name in SCENARIOS:
        print(f"pytorch_claims: {name}", file=sys.stderr, flush=True)
        child = subprocess.run([sys.executable, __file__, "--names", args.names, "--scenario", name],
                               capture_output=True, text=True)
        if child.returncode != 0:
            print(f"pytorch_claims: error: scenario {name} failed:\n{child.stderr}", file=sys.stderr)
            return 1
        measurements.append(json.loads(child.stdout.strip().splitlines()[-1]))
    with open(args.out + ".tmp", "w") as out:
        json.dump({"context": context(), "measurements": measurements}, out, indent=1)
    os.replace(args.out + ".tmp", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
