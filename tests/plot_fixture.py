"""Synthetic vrambench results for the plot tests (docs/results-json.md).

sim_result() stands in for a `vrambench run` output on the simulated device
until the runner exists; replace its use in tests/test_plots.py by a real
run's file and these tests keep working. The memory figures come from a toy
model of two policies (cudaMalloc per call, rounded to 2 MiB; and a cache
that keeps freed blocks for reuse), so timelines look like the real thing.
"""

import copy
import json
import os
import random

# The names the scenarios define (`vrambench list names --json`, committed):
# counter names are built from its counter families, never re-spelled here.
NAMES_JSON = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "docs", "names.json")
with open(NAMES_JSON, encoding="utf-8") as names_file:
    NAMES = json.load(names_file)["scenarios"]


def family_counters(scenario, family):
    """[(member parameter, counter name)] of one counter family of scenario."""
    families = NAMES[scenario]["counter_families"]
    return [(member["parameter"], families["families"][family][member["name"]])
            for member in families["members"]]

MIB = 1 << 20
GIB = 1 << 30
DRIVER_ROUNDING = 2 * MIB

# Toy latencies (ns) per allocator: malloc p50, malloc p99, free p50, free p99.
LATENCY_NS = {
    "cuda": (9000, 42000, 7000, 30000),
    "caching": (260, 1900, 180, 900),
    "async": (700, 5200, 400, 2600),
    "expandable": (320, 2600, 200, 1100),
    "bfc": (300, 2300, 190, 1000),
    "buddy": (210, 1500, 160, 800),
    "binning": (150, 1100, 120, 600),
    "stitch": (450, 4100, 250, 1500),
}
CACHING_POLICY = {"cuda": False}   # every other allocator caches


def round_up(size, multiple):
    return (size + multiple - 1) // multiple * multiple


def segment_size(size, allocator):
    """Bytes a toy allocator reserves from the device for one request."""
    if allocator == "buddy":
        power = DRIVER_ROUNDING
        while power < size:
            power *= 2
        return power
    if allocator == "cuda" or size > 10 * MIB:
        return round_up(size, DRIVER_ROUNDING)
    return 2 * MIB if size <= MIB else 20 * MIB


class ToyAllocator:
    """Reserved/requested bookkeeping of one toy policy, with its segments.
    A caching policy splits segments into blocks (best fit, small requests
    in 2 MiB segments), coalesces free neighbours and keeps free segments
    until empty_cache; "cuda" reserves one rounded segment per request."""

    def __init__(self, name):
        self.name = name
        self.caches = CACHING_POLICY.get(name, True)
        self.next_address = 0x7F0000000000
        self.segments = []     # {"address", "size", "small", "blocks": [{"offset", "size", "owner"}]}
        self.live = {}         # tensor name -> (segment, block, requested size)
        self.requested = 0

    @property
    def reserved(self):
        return sum(s["size"] for s in self.segments)

    def new_segment(self, size, small):
        segment = {"address": self.next_address, "size": size, "small": small,
                   "blocks": [{"offset": 0, "size": size, "owner": None}]}
        self.next_address += size + DRIVER_ROUNDING
        self.segments.append(segment)
        return segment

    def malloc(self, tensor, size):
        self.requested += size
        need = round_up(size, 512)
        if not self.caches:
            segment = self.new_segment(segment_size(need, self.name), False)
            block = segment["blocks"][0]
            block.update(size=need, owner=tensor)   # the rounding tail is in no block
            self.live[tensor] = (segment, block, size)
            return
        small = need <= MIB
        fits = [(b["size"], s["address"] + b["offset"], s, b) for s in self.segments
                if s["small"] == small for b in s["blocks"]
                if b["owner"] is None and b["size"] >= need]
        if fits:
            _, _, segment, block = min(fits, key=lambda fit: fit[:2])
        else:
            segment = self.new_segment(segment_size(need, self.name), small)
            block = segment["blocks"][0]
        remainder = block["size"] - need
        if remainder >= (512 if small else MIB):
            index = segment["blocks"].index(block)
            segment["blocks"].insert(index + 1, {"offset": block["offset"] + need,
                                                 "size": remainder, "owner": None})
            block["size"] = need
        block["owner"] = tensor
        self.live[tensor] = (segment, block, size)

    def free(self, tensor):
        segment, block, size = self.live.pop(tensor)
        self.requested -= size
        if not self.caches:
            self.segments.remove(segment)
            return
        block["owner"] = None
        merged = []
        for item in segment["blocks"]:
            if merged and merged[-1]["owner"] is None and item["owner"] is None:
                merged[-1]["size"] += item["size"]
            else:
                merged.append(item)
        segment["blocks"] = merged

    def empty_cache(self):
        self.segments = [s for s in self.segments
                         if any(b["owner"] is not None for b in s["blocks"])]

    def segment_map(self):
        """The segments as docs/results-json.md's "segments_at_peak" lists them."""
        return [{"address": s["address"], "size": s["size"], "stream": 0,
                 "blocks": [{"address": s["address"] + b["offset"], "size": b["size"],
                             "allocated": b["owner"] is not None} for b in s["blocks"]]}
                for s in sorted(self.segments, key=lambda s: s["address"])]

    def sample(self, step):
        return {"step": step, "requested": self.requested, "allocated": self.requested,
                "reserved": self.reserved, "driver_used": self.reserved}


# Scenario scripts: (step name, [ops]); op = ("alloc", tensor, bytes) |
# ("free", tensor) | ("empty_cache",).
def views_script():
    return [("x = empty(64 MiB)", [("alloc", "x", 64 * MIB)]),
            ("x,y=x[:]", []),
            ("del x", []),
            ("del y", [("free", "x")]),
            ("empty_cache", [("empty_cache",)])]


def function_scope_script():
    return [("enter f()", []),
            ("a = empty(1 MiB)", [("alloc", "a", MIB)]),
            ("b = empty(300 MiB)", [("alloc", "b", 300 * MIB)]),
            ("c = a @ a (workspace)", [("alloc", "c", 5 * MIB)]),
            ("return from f()", [("free", "a"), ("free", "b"), ("free", "c")]),
            ("gc.collect()", []),
            ("torch.cuda.empty_cache()", [("empty_cache",)])]


def training_cleanup_script():
    return [("model = MLP()", [("alloc", "model", 700 * MIB)]),
            ("optimizer = Adam(model)", [("alloc", "opt", 1400 * MIB)]),
            ("dataset buffers", [("alloc", "data", 2 * GIB)]),
            ("forward + backward", [("alloc", "act", 900 * MIB), ("free", "act")]),
            ("del model", [("free", "model")]),
            ("del optimizer", [("free", "opt")]),
            ("del dataset", [("free", "data")]),
            ("gc.collect()", []),
            ("torch.cuda.synchronize()", []),
            ("torch.cuda.empty_cache()", [("empty_cache",)])]


def random_script(seed, steps, cap):
    """Seeded random alloc/free with a live-memory cap, like random_mix."""
    rng = random.Random(seed)
    live, live_bytes, script = [], 0, []
    for index in range(steps):
        if live and (rng.random() < 0.45 or live_bytes > cap):
            tensor = live.pop(rng.randrange(len(live)))
            live_bytes -= tensor[1]
            script.append((f"free {tensor[0]}", [("free", tensor[0])]))
        else:
            size = rng.choice([4096, 100 * 1024, 256 * 1024, 3 * MIB, 7 * MIB, 17 * MIB,
                               96 * MIB])
            name = f"t{index}"
            live.append((name, size))
            live_bytes += size
            script.append((f"alloc {name}", [("alloc", name, size)]))
    script.append(("free all", [("free", name) for name, _ in live]))
    return script


def run_script(allocator, script):
    """(timeline, peaks dict, segments at peak reserved) of a script."""
    toy = ToyAllocator(allocator)
    timeline, peak_requested, peak_reserved, segments = [], 0, -1, []
    for step, ops in script:
        for op in ops:
            if op[0] == "alloc":
                toy.malloc(op[1], op[2])
            elif op[0] == "free":
                toy.free(op[1])
            else:
                toy.empty_cache()
            peak_requested = max(peak_requested, toy.requested)
            if toy.reserved > peak_reserved:
                peak_reserved, segments = toy.reserved, toy.segment_map()
        timeline.append(toy.sample(step))
    return timeline, peak_requested, peak_reserved, segments


def base_counters(allocator, peak_requested, peak_reserved, segments):
    free_blocks = [b["size"] for s in segments for b in s["blocks"] if not b["allocated"]]
    free_cached = sum(free_blocks)
    frag = (free_cached - max(free_blocks)) / free_cached if free_cached else 0.0
    malloc50, malloc99, free50, free99 = LATENCY_NS.get(allocator.split("[")[0],
                                                        (500, 3000, 300, 1500))
    return {"peak_requested_bytes": peak_requested, "peak_allocated_bytes": peak_requested,
            "peak_reserved_bytes": peak_reserved,
            "overhead_ratio": peak_reserved / peak_requested if peak_requested else 0.0,
            "external_frag_at_peak": frag, "driver_alloc_calls": len(segments),
            "driver_free_calls": len(segments), "alloc_retries": 0, "ooms": 0,
            "malloc_ns_p50": malloc50, "malloc_ns_p99": malloc99,
            "free_ns_p50": free50, "free_ns_p99": free99}


def entry(name, scenario, allocator, counters, timeline, segments, repetitions=1,
          repetition_index=0, real_time=50.0):
    """One run_type "iteration" entry as docs/results-json.md describes it."""
    record = {"name": name, "family_index": 0, "per_family_instance_index": 0,
              "run_name": name, "run_type": "iteration", "repetitions": repetitions,
              "repetition_index": repetition_index, "threads": 1, "iterations": 1,
              "real_time": real_time, "cpu_time": real_time * 0.9, "time_unit": "us",
              "scenario": scenario, "allocator": allocator}
    record.update(counters)
    record["timeline"] = timeline
    if segments is not None:
        record["segments_at_peak"] = segments
    return record


def aggregates(name, scenario, allocator, counters, repetitions, real_time):
    """The _mean/_median/_stddev/_cv entries Google Benchmark adds."""
    records = []
    for aggregate in ("mean", "median", "stddev", "cv"):
        record = {"name": f"{name}_{aggregate}", "family_index": 0,
                  "per_family_instance_index": 0, "run_name": name,
                  "run_type": "aggregate", "repetitions": repetitions, "threads": 1,
                  "aggregate_name": aggregate,
                  "aggregate_unit": "percentage" if aggregate == "cv" else "time",
                  "iterations": repetitions, "real_time": real_time, "cpu_time": real_time,
                  "time_unit": "us", "scenario": scenario, "allocator": allocator}
        record.update({k: (0.0 if aggregate in ("stddev", "cv") else v)
                       for k, v in counters.items()})
        records.append(record)
    return records


def context(device_name="simulated device", simulated=True, date="2025-01-06T10:00:00+00:00",
            allocators=("cuda", "caching"), commit="0123456789abcdef"):
    return {"date": date, "host_name": "ci", "executable": "build/vrambench", "num_cpus": 4,
            "mhz_per_cpu": 2400, "cpu_scaling_enabled": False, "caches": [],
            "load_avg": [0.1, 0.1, 0.1], "library_build_type": "release",
            "json_schema_version": 1, "vrambench_version": "0.1",
            "device_kind": "sim" if simulated else "cuda", "simulated": simulated,
            "device_name": device_name, "driver_version": 0, "runtime_version": 0,
            "device_total_bytes": 80 * GIB, "git_commit": commit,
            "allocator_configs": {a: {} for a in allocators}}


def sim_result(allocators=("cuda", "caching"), scenarios=None, time_factor=1.0,
               device_name="simulated device", simulated=True,
               date="2025-01-06T10:00:00+00:00"):
    """A whole results document: views (with 2 repetitions and aggregates),
    function_scope, training_cleanup, random_mix, empty_cache_loop,
    dataloader_batches and a replayed trace, for each allocator."""
    scripts = {"views": views_script(), "function_scope": function_scope_script(),
               "training_cleanup": training_cleanup_script(),
               "random_mix": random_script(7, 80, 400 * MIB),
               "empty_cache_loop": [(f"iter {i}", [("alloc", f"a{i}", 40 * MIB),
                                                   ("alloc", f"b{i}", 3 * MIB),
                                                   ("free", f"a{i}"), ("free", f"b{i}")])
                                    for i in range(12)],
               "dataloader_batches": [(f"batch {b}", [("alloc", f"x{b}", b * 602112),
                                                      ("free", f"x{b}")])
                                      for b in (32, 256, 2048, 8192)],
               "replay:traces/resnet50_train.json": random_script(11, 400, 3 * GIB)}
    if scenarios is not None:
        scripts = {name: scripts[name] for name in scenarios}
    benchmarks = []
    for scenario, script in scripts.items():
        for index, allocator in enumerate(allocators):
            name = f"{scenario}/{allocator}"
            timeline, peak_req, peak_res, segments = run_script(allocator, script)
            counters = base_counters(allocator, peak_req, peak_res, segments)
            caching = CACHING_POLICY.get(allocator, True)
            if scenario == "empty_cache_loop":
                base_ns = LATENCY_NS.get(allocator, (500,))[0] * 4
                # every: empty_cache every N iterations (0: never).
                iter_ns = {1: 160000, 10: 16000 if caching else 160000, 0: 0 if caching else 160000}
                driver_calls = {1: 48, 10: 6 if caching else 48, 0: 2 if caching else 48}
                for every, counter in family_counters(scenario, "iter_ns"):
                    counters[counter] = base_ns + iter_ns[every]
                for every, counter in family_counters(scenario, "driver_calls"):
                    counters[counter] = driver_calls[every]
                for every, counter in family_counters(scenario, "peak_reserved_bytes"):
                    counters[counter] = peak_res
            if scenario == "dataloader_batches":
                for (batch, requested_name), (_, reserved_name) in zip(
                        family_counters(scenario, "peak_requested_bytes"),
                        family_counters(scenario, "peak_reserved_bytes")):
                    requested = batch * 602112 + 96 * MIB
                    reserved = (round_up(requested, DRIVER_ROUNDING) if not caching
                                else round_up(int(requested * (1.08 + 0.03 * index)), 20 * MIB))
                    counters[requested_name] = requested
                    counters[reserved_name] = reserved
            real_time = time_factor * (40.0 + 15 * len(script)) * (3 if allocator == "cuda" else 1)
            repetitions = 2 if scenario == "views" else 1
            for repetition in range(repetitions):
                benchmarks.append(entry(name, scenario, allocator, counters,
                                        timeline, segments, repetitions, repetition,
                                        real_time * (1 + 0.1 * repetition)))
            if repetitions > 1:
                benchmarks += aggregates(name, scenario, allocator, counters,
                                         repetitions, real_time)
    return {"context": context(device_name, simulated, date, allocators),
            "benchmarks": benchmarks,
            "names": {scenario: copy.deepcopy(NAMES[scenario]) for scenario in scripts
                      if scenario in NAMES}}


def microbench_result(allocators=("cuda", "caching"), device_name="simulated device",
                      simulated=True, date="2025-01-06T10:00:00+00:00"):
    """A `vrambench microbench` document: microbench/ALLOCATOR/BYTES entries."""
    benchmarks = []
    for allocator in allocators:
        malloc50, malloc99, free50, free99 = LATENCY_NS.get(allocator, (500, 3000, 300, 1500))
        for shift in range(9, 30, 2):
            size = 1 << shift
            grow = 1.0 + (size / GIB) * (20 if allocator == "cuda" else 2)
            name = f"microbench/{allocator}/{size}"
            benchmarks.append({"name": name, "run_name": name, "run_type": "iteration",
                               "repetitions": 1, "repetition_index": 0, "threads": 1,
                               "iterations": 1000, "real_time": malloc50 * grow / 1000,
                               "cpu_time": malloc50 * grow / 1000, "time_unit": "us",
                               "bytes": size, "malloc_ns_p50": malloc50 * grow,
                               "malloc_ns_p99": malloc99 * grow, "free_ns_p50": free50 * grow,
                               "free_ns_p99": free99 * grow})
    return {"context": context(device_name, simulated, date, allocators),
            "benchmarks": benchmarks}
