"""`--allocator external:PATH.so` from the command line on the simulated
device: a library that is missing, not a shared object, or lacks the
pluggable-allocator symbols is one error line and exit 2 (checked before the
device is asked), and a good one is refused on sim with one line and exit 2
(it calls CUDA itself). Standard library only; run by `make test` (VRAMBENCH
names the binary; the test allocator is built next to it in tests/)."""
import os
import subprocess
import tempfile
import unittest

VRAMBENCH = os.path.abspath(os.environ.get("VRAMBENCH", "build/vrambench"))
TEST_SO = os.environ.get("VB_EXTERNAL_TEST_SO") or os.path.join(
    os.path.dirname(VRAMBENCH), "tests", "libvb_external_test.so")
TEST_SO = os.path.abspath(TEST_SO)


def vrambench(*args):
    done = subprocess.run([VRAMBENCH, *args], capture_output=True, text=True, timeout=300)
    return done.returncode, done.stdout, done.stderr


def linked_library(fragment):
    """The path of a shared library vrambench itself links (from ldd), or None."""
    done = subprocess.run(["ldd", VRAMBENCH], capture_output=True, text=True)
    for line in done.stdout.splitlines():
        if fragment in line and "=>" in line:
            path = line.split("=>")[1].split("(")[0].strip()
            if os.path.isfile(path):
                return path
    return None


class ExternalAllocator(unittest.TestCase):
    def setUp(self):
        if not os.path.isfile(TEST_SO):
            self.fail(f"the external test allocator was not built: {TEST_SO}")

    def assert_one_error(self, spec, expect, command="run"):
        with tempfile.TemporaryDirectory() as directory:
            out = os.path.join(directory, "out.json")
            if command == "run":
                args = ["run", "--scenario", "views", "--allocator", spec, "--device", "sim", "--out", out]
            elif command == "replay":
                args = ["replay", "tests/fixtures/traces/gpt2.trace.gz", "--allocator", spec, "--device", "sim",
                        "--out", out]
            else:
                args = ["microbench", "--allocator", spec, "--device", "sim", "--out", out]
            status, _, stderr = vrambench(*args)
            self.assertEqual(status, 2, stderr)
            lines = stderr.strip().splitlines()
            self.assertEqual(len(lines), 1, stderr)
            self.assertTrue(lines[0].startswith("vrambench: error: external:"), stderr)
            self.assertIn(expect, lines[0])
            self.assertFalse(os.path.exists(out), "a result file was written")

    def test_missing_library_is_one_error_line(self):
        self.assert_one_error("external:/no/such/lib.so", "cannot load it")

    def test_a_file_that_is_not_a_shared_object_is_one_error_line(self):
        self.assert_one_error("external:" + os.path.abspath("README.md"), "cannot load it")

    def test_a_library_without_the_symbols_is_one_error_line(self):
        library = linked_library("libjansson") or linked_library("libz")
        if not library:
            self.skipTest("no linked library found to load")
        self.assert_one_error("external:" + library, "no symbol 'vb_torch_malloc'")

    def test_a_missing_chosen_symbol_is_one_error_line(self):
        self.assert_one_error(f"external:{TEST_SO}[malloc=no_such_symbol]", "no symbol 'no_such_symbol'")

    def test_an_unknown_option_is_one_error_line(self):
        self.assert_one_error(f"external:{TEST_SO}[bogus=1]", "unknown config key 'bogus'")

    def test_a_good_library_is_refused_on_sim(self):
        for command in ("run", "replay", "microbench"):
            with self.subTest(command=command):
                self.assert_one_error("external:" + TEST_SO, "cuda device only", command)

    def test_bad_library_among_others_stops_before_anything_runs(self):
        self.assert_one_error("caching,external:/no/such/lib.so", "cannot load it")

    def test_list_allocators_names_external(self):
        status, stdout, _ = vrambench("list", "allocators")
        self.assertEqual(status, 0)
        self.assertTrue(any(line.startswith("external:PATH.so ") for line in stdout.splitlines()), stdout)


if __name__ == "__main__":
    unittest.main()
