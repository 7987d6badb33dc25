#!/usr/bin/env python3
"""A/B of allocators under real PyTorch workloads (GPU; PyTorch, torchvision,
transformers; no downloads).

Each (workload, allocator) runs in a fresh Python process, so the allocator
starts empty and can be installed before the first CUDA allocation:

  workloads   training_cleanup, dataloader_batches, empty_cache_loop (the
              documents' own code, from lab/harnesses/pytorch_claims.py), resnet50
              (torchvision ResNet-50 training on random data), gpt2_train
              (GPT-2-style LM from a transformers config, training with
              varying sequence lengths), gpt2_generate (generate() loop)
  allocators  pytorch (native CUDACachingAllocator), pytorch[expandable_segments],
              pytorch[cudaMallocAsync] (PYTORCH_ALLOC_CONF), and every
              vrambench strategy through the plug-in (python/vrambench/plugin.py;
              build/libvrambench_torch.so from `make plugin`)

Per run: step time (median of the steps after the warm-up, each between two
torch.cuda.synchronize()), peak requested/allocated/reserved bytes (the
plug-in's statistics; torch.cuda.memory_stats() for PyTorch's own), the
driver-used memory (cudaMemGetInfo: total - free, before the workload and at
its peak over the steps), and the final loss (deterministic settings: seeds,
cuDNN deterministic, torch.use_deterministic_algorithms(warn_only=True),
CUBLAS_WORKSPACE_CONFIG, eager attention). An allocator must not change the
results: `loss_matches_native` says whether the loss equals pytorch's bit
for bit; loss_rel_diff gives the relative difference otherwise (the stated
tolerance, LOSS_TOLERANCE, is 0: any difference is reported).

Output: Google Benchmark JSON (results/torch-ab-<device>-<date>.json by
default), entries "<workload>/<allocator>", real_time = median step time.

  python3 lab/harnesses/torch_ab.py [--out FILE] [--append] [--quick]
        [--workloads a,b] [--allocators pytorch,stitch,...] [--budget-s 420]

A child that fails (an allocator out of memory aborts through the plug-in)
or takes over CHILD_TIMEOUT_S becomes an entry with error_occurred.
"""
import argparse
import datetime
import json
import os
import statistics
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))

NATIVE = {
    "pytorch": None,
    "pytorch[expandable_segments]": "expandable_segments:True",
    "pytorch[cudaMallocAsync]": "backend:cudaMallocAsync",
}
# The vrambench strategies (allocators/registry.c), when the binary cannot be asked.
STRATEGIES = ["cuda", "caching", "async", "expandable", "bfc", "buddy", "binning", "stitch"]
WORKLOADS = ["training_cleanup", "dataloader_batches", "empty_cache_loop", "resnet50", "gpt2_train",
             "gpt2_generate"]
LOSS_TOLERANCE = 0.0
CHILD_TIMEOUT_S = 120


# ---------------------------------------------------------------------------
# Child: one workload under one allocator
# ---------------------------------------------------------------------------

class Steps:
    """Times steps between synchronizations and samples the driver's used memory."""

    def __init__(self, torch):
        self.torch = torch
        self.times_ns = []
        self.driver_peak = 0
        self.loss = None

    def driver_used(self):
        free, total = self.torch.cuda.mem_get_info()
        return total - free

    def run(self, body):
        torch = self.torch
        torch.cuda.synchronize()
        started = time.perf_counter_ns()
        result = body()
        torch.cuda.synchronize()
        self.times_ns.append(time.perf_counter_ns() - started)
        self.driver_peak = max(self.driver_peak, self.driver_used())
        return result


def deterministic(torch, seed=0):
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(True, warn_only=True)


def documents_workload(name):
    """One of lab/harnesses/pytorch_claims.py's scenarios, run as steps: each step is
    the whole scenario (the documents' code cleans up after itself); the loss
    is the last training_step's."""
    def workload(torch, steps, quick):
        import pytorch_claims
        losses = []
        original = pytorch_claims.training_step

        def training_step(torch_, data, model, optimizer):
            loss = original(torch_, data, model, optimizer)
            losses.append(loss)
            return loss

        pytorch_claims.training_step = training_step
        scenario = pytorch_claims.SCENARIOS[name]
        names = pytorch_claims.load_names(pytorch_claims.NAMES_JSON)[name]
        for _ in range(2 if quick else 3):  # the first is the warm-up
            deterministic(torch)
            steps.run(lambda: scenario(torch, pytorch_claims.Recorder(torch, names)))
        steps.loss = losses[-1] if losses else None
        return 1
    return workload


def resnet50(torch, steps, quick):
    import torchvision
    deterministic(torch)
    model = torchvision.models.resnet50(weights=None, num_classes=1000).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    batch = 16 if quick else 32
    generator = torch.Generator(device="cpu").manual_seed(1)
    images = torch.randn(batch, 3, 224, 224, generator=generator).cuda()
    labels = torch.randint(0, 1000, (batch,), generator=generator).cuda()

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        return loss

    for _ in range(3 if quick else 12):
        loss = steps.run(step)
    steps.loss = loss.item()
    return 3 if quick else 2


def gpt2_model(torch, transformers):
    config = transformers.GPT2Config(vocab_size=8192, n_positions=512, n_embd=384, n_layer=6, n_head=6)
    try:
        model = transformers.GPT2LMHeadModel(config, attn_implementation="eager")
    except TypeError:
        config._attn_implementation = "eager"
        model = transformers.GPT2LMHeadModel(config)
    return model.cuda()


def gpt2_train(torch, steps, quick):
    import transformers
    deterministic(torch)
    model = gpt2_model(torch, transformers)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    lengths = [64, 256, 128, 512, 96, 384, 192, 448] if not quick else [64, 256, 128, 512]
    generator = torch.Generator(device="cpu").manual_seed(2)
    batches = [torch.randint(0, 8192, (8, length), generator=generator).cuda() for length in lengths]

    def step(ids):
        optimizer.zero_grad(set_to_none=True)
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        return loss

    rounds = 1 if quick else 2
    for _ in range(rounds):
        for ids in batches:
            loss = steps.run(lambda: step(ids))
    steps.loss = loss.item()
    return len(batches) // 2  # the first half of round 1 warms up


def gpt2_generate(torch, steps, quick):
    import transformers
    deterministic(torch)
    model = gpt2_model(torch, transformers).eval()
    generator = torch.Generator(device="cpu").manual_seed(3)
    prompts = torch.randint(0, 8192, (4, 32), generator=generator).cuda()
    tokens = None
    for _ in range(3 if quick else 6):
        with torch.no_grad():
            tokens = steps.run(lambda: model.generate(prompts, attention_mask=torch.ones_like(prompts),
                                                      max_new_tokens=64, do_sample=False, pad_token_id=0))
    # The "loss" of generation: a checksum of the tokens, which must not change.
    steps.loss = float((tokens.long() * torch.arange(1, tokens.shape[1] + 1, device=tokens.device)).sum().item())
    return 1


RUNNERS = {name: documents_workload(name) for name in ("training_cleanup", "dataloader_batches",
                                                       "empty_cache_loop")}
RUNNERS.update(resnet50=resnet50, gpt2_train=gpt2_train, gpt2_generate=gpt2_generate)


def child(workload, allocator, quick, library):
    """Runs one pair and prints its JSON on the last line of stdout."""
    plugin = allocator not in NATIVE
    if plugin:
        from vrambench import plugin
        plugin.use(allocator, library)
    import torch
    torch.cuda.init()
    torch.cuda.synchronize()
    steps = Steps(torch)
    baseline = steps.driver_used()
    warmup = RUNNERS[workload](torch, steps, quick)
    torch.cuda.synchronize()
    measured = steps.times_ns[warmup:] or steps.times_ns
    stats = torch.cuda.memory_stats()  # the plug-in's under the same names when patched
    result = {
        "workload": workload, "allocator": allocator,
        "iterations": len(measured), "step_ns_median": statistics.median(measured),
        "step_ns": steps.times_ns,
        "peak_reserved_bytes": stats.get("reserved_bytes.all.peak"),
        "peak_allocated_bytes": stats.get("allocated_bytes.all.peak"),
        "peak_requested_bytes": stats.get("requested_bytes.all.peak"),
        "num_alloc_retries": stats.get("num_alloc_retries"),
        "num_ooms": stats.get("num_ooms"),
        "num_device_alloc": stats.get("num_device_alloc"),
        "num_device_free": stats.get("num_device_free"),
        "stats_source": "vrambench plug-in" if plugin else "torch.cuda.memory_stats",
        "driver_used_baseline_bytes": baseline,
        "driver_used_peak_bytes": steps.driver_peak,
        "final_loss": steps.loss,
        "final_loss_hex": struct.pack(">d", steps.loss).hex() if steps.loss is not None else None,
    }
    print(json.dumps(result), flush=True)


# ---------------------------------------------------------------------------
# Parent: the matrix
# ---------------------------------------------------------------------------

def strategies():
    """The vrambench strategies, from the built binary when there is one."""
    binary = os.path.join(ROOT, "build", "vrambench")
    try:
        listing = subprocess.run([binary, "list", "allocators"], capture_output=True, text=True, timeout=30).stdout
        names = [line.split()[0] for line in listing.splitlines()
                 if line and not line[0].isspace() and not line.startswith("external:")]
        return names or STRATEGIES
    except OSError:
        return STRATEGIES


def context():
    import torch
    props = torch.cuda.get_device_properties(0)
    return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "device_kind": "cuda", "simulated": False, "device_name": props.name,
            "device_total_bytes": props.total_memory, "torch_version": torch.__version__,
            "cuda_version": torch.version.cuda, "executable": "lab/harnesses/torch_ab.py",
            "loss_tolerance": LOSS_TOLERANCE,
            "stats_note": "peaks from the vrambench plug-in's statistics for vrambench strategies, from "
                          "torch.cuda.memory_stats() for pytorch*; driver_used from cudaMemGetInfo"}


def device_slug(name):
    return "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-").replace("--", "-")


def entry(result, native):
    name = f"{result['workload']}/{result['allocator']}"
    out = {"name": name, "run_name": name, "run_type": "iteration", "repetitions": 1, "repetition_index": 0,
           "threads": 1, "time_unit": "ns"}
    if "error" in result:
        out.update(error_occurred=True, error_message=result["error"], workload=result["workload"],
                   allocator=result["allocator"])
        return out
    out.update(iterations=result["iterations"], real_time=result["step_ns_median"],
               cpu_time=result["step_ns_median"])
    out.update({k: v for k, v in result.items() if k not in ("iterations", "step_ns_median")})
    if native and native.get("final_loss") is not None and result.get("final_loss") is not None:
        a, b = result["final_loss"], native["final_loss"]
        out["loss_matches_native"] = result["final_loss_hex"] == native["final_loss_hex"]
        out["loss_rel_diff"] = abs(a - b) / abs(b) if b else abs(a - b)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", help="JSON to write, {device} and {date} expanded "
                        "(default results/torch-ab-{device}-{date}.json)")
    parser.add_argument("--append", action="store_true", help="keep the entries of an existing --out file")
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--allocators", default="all", help="pytorch,...,stitch or all")
    parser.add_argument("--quick", action="store_true", help="fewer steps and smaller batches")
    parser.add_argument("--budget-s", type=float, default=0, help="start no new run after this many seconds")
    parser.add_argument("--plugin", help="the plug-in library (default build/libvrambench_torch.so)")
    parser.add_argument("--child", nargs=2, metavar=("WORKLOAD", "ALLOCATOR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], args.quick, args.plugin)
        return 0
    workloads = [w for w in args.workloads.split(",") if w]
    for w in workloads:
        if w not in RUNNERS:
            parser.error(f"unknown workload '{w}' (known: {', '.join(WORKLOADS)})")
    allocators = list(NATIVE) + strategies() if args.allocators == "all" else args.allocators.split(",")
    ctx = context()
    out = (args.out or os.path.join(ROOT, "results", "torch-ab-{device}-{date}.json")).replace(
        "{device}", device_slug(ctx["device_name"])).replace(
        "{date}", f"{datetime.datetime.now(datetime.timezone.utc):%Y%m%d}")
    kept = []
    if args.append and os.path.exists(out):
        with open(out) as f:
            kept = json.load(f)["benchmarks"]
    started = time.monotonic()
    results = {}
    for workload in workloads:
        for allocator in allocators:
            if args.budget_s and time.monotonic() - started > args.budget_s:
                print(f"torch_ab: budget spent, skipping {workload}/{allocator}", file=sys.stderr, flush=True)
                continue
            command = [sys.executable, os.path.abspath(__file__), "--child", workload, allocator]
            command += ["--quick"] if args.quick else []
            command += ["--plugin", args.plugin] if args.plugin else []
            env = dict(os.environ, CUBLAS_WORKSPACE_CONFIG=":4096:8", PYTHONHASHSEED="0")
            for name in ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF"):
                env.pop(name, None)  # PyTorch reads the first one set: PYTORCH_ALLOC_CONF, then the deprecated
            if NATIVE.get(allocator):  # both names: older PyTorch reads only PYTORCH_CUDA_ALLOC_CONF
                env["PYTORCH_ALLOC_CONF"] = env["PYTORCH_CUDA_ALLOC_CONF"] = NATIVE[allocator]
            t0 = time.monotonic()
            try:
                done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=CHILD_TIMEOUT_S)
                lines = done.stdout.strip().splitlines()
                if done.returncode == 0 and lines:
                    result = json.loads(lines[-1])
                else:
                    tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
                    result = {"workload": workload, "allocator": allocator,
                              "error": f"exit {done.returncode}: {tail}"}
            except subprocess.TimeoutExpired:
                result = {"workload": workload, "allocator": allocator, "error": f"timed out after {CHILD_TIMEOUT_S} s"}
            results[(workload, allocator)] = result
            summary = result.get("error") or (f"step {result['step_ns_median'] / 1e6:.2f} ms, peak reserved "
                                              f"{(result['peak_reserved_bytes'] or 0) / 2**20:.1f} MiB, "
                                              f"loss {result['final_loss']}")
            print(f"torch_ab: {workload}/{allocator}: {summary} ({time.monotonic() - t0:.1f} s)",
                  file=sys.stderr, flush=True)
    names = {f"{w}/{a}" for (w, a) in results}
    benchmarks = [b for b in kept if b["name"] not in names]
    kept_native = {b.get("workload"): b for b in kept if b.get("allocator") == "pytorch" and "error_occurred" not in b}
    for (workload, allocator), result in results.items():
        benchmarks.append(entry(result, results.get((workload, "pytorch")) or kept_native.get(workload)))
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out + ".tmp", "w") as f:
        json.dump({"context": ctx, "benchmarks": benchmarks}, f, indent=1)
    os.replace(out + ".tmp", out)
    print(f"torch_ab: wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
