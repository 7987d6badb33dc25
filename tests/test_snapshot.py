"""`vrambench replay --snapshot`: the replay as a PyTorch memory snapshot.
The pickle is loaded with Python's own unpickler (plain data only, no torch),
checked for what PyTorch's memory viewer reads, and python/vrambench/torch2trace.py reads
it back to the same events. Standard library only; run by `make test`."""
import importlib.util
import io
import os
import pickle
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
VRAMBENCH = os.path.abspath(os.environ.get("VRAMBENCH", "build/vrambench"))
SPEC = importlib.util.spec_from_file_location("torch2trace", os.path.join(HERE, "..", "python", "vrambench", "torch2trace.py"))
torch2trace = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(torch2trace)

# Two streams, markers, a block freed on the other stream, allocations left live.
TRACE = """vbtrace 1
m step 1
a 10 4000256 0
a 11 1048576 1
a 12 30000000 0
f 11 1
f 10
m step 2
a 13 4000256
a 14 100
f 13
f 12
a 15 50000000 1
"""


def events(trace_text):
    """(kind, size or marker, stream) per line, allocation ids renamed in order
    of appearance, so two traces compare whatever ids they use."""
    ids, out = {}, []
    for line in trace_text.splitlines():
        fields = line.split()
        if not fields or fields[0] in ("vbtrace", "#"):
            continue
        if fields[0] == "m":
            out.append(("m", " ".join(fields[1:])))
        elif fields[0] == "a":
            ids[fields[1]] = len(ids)
            out.append(("a", ids[fields[1]], int(fields[2]), int(fields[3]) if len(fields) > 3 else 0))
        elif fields[0] == "f":
            out.append(("f", ids[fields[1]]))
    return out


class Snapshot(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.TemporaryDirectory()
        self.dir = self.directory.name

    def tearDown(self):
        self.directory.cleanup()

    def snapshot(self, trace_text, allocator, *args):
        trace = os.path.join(self.dir, "in.trace")
        with open(trace, "w") as f:
            f.write(trace_text)
        path = os.path.join(self.dir, allocator.split("[")[0] + ".pickle")
        done = subprocess.run([VRAMBENCH, "replay", trace, "--device", "sim", "--quiet", "--allocator", allocator,
                               "--snapshot", path, *args], capture_output=True, text=True, timeout=300)
        self.assertEqual(done.returncode, 0, done.stderr)
        return path, torch2trace.load_snapshot(path)  # plain data only: no class can be named

    def round_trip(self, trace_text, allocator):
        path, snapshot = self.snapshot(trace_text, allocator)
        out = io.StringIO()
        torch2trace.convert(snapshot, out, path=path)
        self.assertEqual(events(out.getvalue()), events(trace_text), allocator)
        return snapshot

    def test_torch2trace_reads_back_the_same_events(self):
        for allocator in ("caching", "expandable", "cuda", "bfc", "stitch"):
            self.round_trip(TRACE, allocator)

    def test_a_random_trace_round_trips(self):
        trace = os.path.join(self.dir, "random.trace")
        done = subprocess.run([VRAMBENCH, "gen-trace", "random", "--seed", "7", "--events", "5000", "--max-size",
                               "40M", "--max-live", "400M", "-o", trace], capture_output=True, text=True)
        self.assertEqual(done.returncode, 0, done.stderr)
        with open(trace) as f:
            text = f.read()
        snapshot = self.round_trip(text, "caching")
        self.assertGreater(len(snapshot["device_traces"][0]), 5000)

    def test_segments_are_what_the_viewer_reads(self):
        _, snapshot = self.snapshot(TRACE, "caching")
        self.assertEqual(len(snapshot["device_traces"]), 1)
        segments = snapshot["segments"]
        self.assertTrue(segments)
        live_requested = 0
        for segment in segments:
            for key in ("device", "address", "total_size", "allocated_size", "active_size", "requested_size",
                        "stream", "segment_type", "is_expandable", "frames", "blocks"):
                self.assertIn(key, segment)
            address = segment["address"]
            for block in segment["blocks"]:  # blocks tile the segment in address order
                self.assertEqual(block["address"], address)
                self.assertIn(block["state"], ("active_allocated", "inactive"))
                self.assertLessEqual(block["requested_size"], block["size"])
                address += block["size"]
                live_requested += block["requested_size"]
            self.assertEqual(address, segment["address"] + segment["total_size"])
        self.assertEqual(live_requested, 100 + 50000000)  # ids 14 and 15 stay live
        names = [a["name"] for a in snapshot["external_annotations"]]
        self.assertEqual(names, ["step 1", "step 2"])

    def check_segment_events_lead_to_the_end_state(self, allocator, alloc, free):
        """Playing the segment entries forward from nothing gives the final
        segments: the viewer walks them backwards from that state."""
        _, snapshot = self.snapshot(TRACE, allocator)
        covered = set()  # 512-byte granules mapped
        for entry in snapshot["device_traces"][0]:
            granules = set(range(entry["addr"] // 512, (entry["addr"] + entry["size"]) // 512))
            if entry["action"] == alloc:
                self.assertFalse(covered & granules, entry)
                covered |= granules
            elif entry["action"] == free:
                self.assertEqual(covered & granules, granules, entry)
                covered -= granules
        final = set()
        for segment in snapshot["segments"]:
            final |= set(range(segment["address"] // 512, (segment["address"] + segment["total_size"]) // 512))
        self.assertEqual(covered, final)

    def test_caching_segment_events_match_its_segments(self):
        self.check_segment_events_lead_to_the_end_state("caching", "segment_alloc", "segment_free")

    def test_expandable_maps_and_unmaps_match_its_segments(self):
        self.check_segment_events_lead_to_the_end_state("expandable", "segment_map", "segment_unmap")
        _, snapshot = self.snapshot(TRACE, "expandable")
        self.assertTrue(all(s["is_expandable"] for s in snapshot["segments"]))

    def test_out_of_memory_is_an_oom_entry(self):
        _, snapshot = self.snapshot("vbtrace 1\na 1 31457280\na 2 31457280\na 3 31457280\n", "caching",
                                    "--sim-capacity", "64MiB")
        ooms = [e for e in snapshot["device_traces"][0] if e["action"] == "oom"]
        self.assertEqual(len(ooms), 1)
        self.assertEqual(ooms[0]["size"], 31457280)

    def test_snapshot_needs_one_allocator_and_a_replay(self):
        trace = os.path.join(self.dir, "in.trace")
        with open(trace, "w") as f:
            f.write(TRACE)
        path = os.path.join(self.dir, "s.pickle")
        done = subprocess.run([VRAMBENCH, "replay", trace, "--device", "sim", "--quiet", "--allocator",
                               "caching,cuda", "--snapshot", path], capture_output=True, text=True)
        self.assertEqual(done.returncode, 2)
        self.assertFalse(os.path.exists(path))


if __name__ == "__main__":
    unittest.main()
