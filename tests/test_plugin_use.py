"""vrambench.plugin.use() must come before any CUDA call in PyTorch (issue 25):
once CUDA is initialised (torch.cuda.set_device included) PyTorch cannot swap
its allocator, so use() says so itself, with what to do, instead of PyTorch's
"Can't swap an already initialized allocator". Runs without PyTorch: a
stand-in torch module answers torch.cuda.is_initialized()."""
import os
import sys
import types
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))

from vrambench import plugin  # noqa: E402


def fake_torch(initialized):
    """A torch module whose CUDA is (or is not) initialised."""
    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(is_initialized=lambda: initialized)
    return torch


class UseBeforeCuda(unittest.TestCase):
    def setUp(self):
        self.saved = sys.modules.get("torch")

    def tearDown(self):
        if self.saved is None:
            sys.modules.pop("torch", None)
        else:
            sys.modules["torch"] = self.saved

    def test_use_after_cuda_is_initialised_raises_saying_to_call_it_first(self):
        sys.modules["torch"] = fake_torch(initialized=True)
        with self.assertRaises(RuntimeError) as raised:
            plugin.use("caching", library="/nonexistent/libvrambench_torch.so")
        message = str(raised.exception)
        self.assertIn("must be called before any CUDA call", message)
        self.assertIn("torch.cuda.set_device", message)
        self.assertIn("Can't swap an already initialized allocator", message)

    def test_a_library_path_that_is_a_folder_is_named_as_a_folder(self):
        sys.modules["torch"] = fake_torch(initialized=False)
        with self.assertRaises(FileNotFoundError) as raised:
            plugin.use("caching", library=os.path.dirname(os.path.abspath(__file__)))
        self.assertIn("a folder, not the library", str(raised.exception))

    def test_a_library_that_does_not_load_leaves_no_spec_in_the_environment(self):
        sys.modules["torch"] = fake_torch(initialized=False)
        saved = os.environ.pop("VRAMBENCH_ALLOCATOR", None)
        try:
            with self.assertRaises(OSError):
                plugin.use("caching", library=os.path.abspath(__file__))  # a file, not a shared library
            self.assertNotIn("VRAMBENCH_ALLOCATOR", os.environ)
        finally:
            if saved is not None:
                os.environ["VRAMBENCH_ALLOCATOR"] = saved

    def test_an_empty_spec_is_refused_as_empty_not_as_unset(self):
        sys.modules["torch"] = fake_torch(initialized=False)
        saved = os.environ.pop("VRAMBENCH_ALLOCATOR", None)
        try:
            with self.assertRaises(ValueError) as raised:
                plugin.use("", library=os.path.abspath(__file__))
            self.assertNotIn("VRAMBENCH_ALLOCATOR", os.environ)
        finally:
            if saved is not None:
                os.environ["VRAMBENCH_ALLOCATOR"] = saved
        message = str(raised.exception)
        self.assertIn("allocator spec is empty", message)
        self.assertNotIn("not set", message)
        self.assertEqual(len(message.splitlines()), 1)

    def test_use_before_cuda_goes_on_to_load_the_library(self):
        sys.modules["torch"] = fake_torch(initialized=False)
        with self.assertRaises(FileNotFoundError):
            plugin.use("caching", library="/nonexistent/libvrambench_torch.so")


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLUGIN = os.path.join(ROOT, "build", "libvrambench_torch.so")

# Runs in a child: the loaded plug-in's state is the process's. Each spec is
# tried in turn; prints one line per try, the error's type and message.
RETRY = r"""
import os, sys, types
sys.path.insert(0, sys.argv[1])
torch = types.ModuleType("torch")
memory = types.SimpleNamespace(CUDAPluggableAllocator=lambda *a: None, change_current_allocator=lambda a: None)
torch.cuda = types.SimpleNamespace(is_initialized=lambda: False, memory=memory)
sys.modules["torch"] = torch
from vrambench import plugin
for spec in sys.argv[3:]:
    try:
        plugin.use(spec, library=sys.argv[2], patch_torch=False)
        print("ok", spec)
    except Exception as error:
        print(type(error).__name__, str(error).splitlines()[0], "| env:", os.environ.get("VRAMBENCH_ALLOCATOR"))
"""


@unittest.skipUnless(os.path.isfile(PLUGIN), "the plug-in is not built (make plugin, cuda builds)")
class UseAgainAfterABadSpec(unittest.TestCase):
    def tries(self, *specs):
        import subprocess
        env = dict(os.environ)
        env.pop("VRAMBENCH_ALLOCATOR", None)
        done = subprocess.run([sys.executable, "-c", RETRY, os.path.join(ROOT, "python"), PLUGIN, *specs],
                              capture_output=True, text=True, timeout=60, env=env)
        self.assertEqual(done.returncode, 0, done.stderr)
        return done.stdout.splitlines()

    def test_each_use_is_judged_on_its_own_spec_not_an_earlier_refused_one(self):
        first, second = self.tries("stich", "caching[bogus=1]")
        self.assertIn("unknown allocator 'stich'", first)
        self.assertIn("unknown config key 'bogus'", second)
        self.assertNotIn("stich", second)

    def test_a_refused_spec_is_not_left_in_the_environment(self):
        (line,) = self.tries("stich")
        self.assertTrue(line.endswith("| env: None"), line)

    def test_an_empty_variable_is_named_empty_and_an_unset_one_unset(self):
        # The library read directly (as a process started with the variable
        # set to "" does), not through use(), which refuses "" itself.
        import subprocess
        child = ("import ctypes, sys; lib = ctypes.CDLL(sys.argv[1]); lib.vb_torch_init.restype = ctypes.c_char_p; "
                 "print(lib.vb_torch_init().decode())")
        said = {}
        for label, value in (("empty", ""), ("unset", None)):
            env = dict(os.environ)
            env.pop("VRAMBENCH_ALLOCATOR", None)
            if value is not None:
                env["VRAMBENCH_ALLOCATOR"] = value
            done = subprocess.run([sys.executable, "-c", child, PLUGIN], capture_output=True, text=True,
                                  timeout=60, env=env)
            self.assertEqual(done.returncode, 0, done.stderr)
            said[label] = done.stdout
        self.assertIn("VRAMBENCH_ALLOCATOR is empty", said["empty"])
        self.assertNotIn("not set", said["empty"])
        self.assertIn("VRAMBENCH_ALLOCATOR is not set", said["unset"])

    def test_a_long_bad_value_is_quoted_short_and_the_reason_kept(self):
        # The value was quoted whole, twice (the line and the spec's own
        # message), and the line was cut at 767 bytes before the reason.
        import subprocess
        child = ("import ctypes, sys; lib = ctypes.CDLL(sys.argv[1]); lib.vb_torch_init.restype = ctypes.c_char_p; "
                 "print(lib.vb_torch_init().decode())")
        for value, reason in (("caching[" + "x" * 700, "is not NAME[KEY=VALUE,...]"), ("q" * 700, "is too long")):
            with self.subTest(reason):
                env = dict(os.environ, VRAMBENCH_ALLOCATOR=value)
                done = subprocess.run([sys.executable, "-c", child, PLUGIN], capture_output=True, text=True,
                                      timeout=60, env=env)
                self.assertEqual(done.returncode, 0, done.stderr)
                self.assertTrue(done.stdout.rstrip("\n").endswith(reason), done.stdout)
                self.assertIn("...'", done.stdout)

    def test_a_misspelt_out_of_memory_mode_is_a_set_up_error(self):
        # VRAMBENCH_TORCH_ON_OOM took any value but exactly "null" as "abort".
        import subprocess
        child = ("import ctypes, sys; lib = ctypes.CDLL(sys.argv[1]); lib.vb_torch_init.restype = ctypes.c_char_p; "
                 "said = lib.vb_torch_init(); print(said.decode() if said else 'ok')")
        for value, expected in (("NULL", "did you mean null?"), ("none", "is not null"), ("null", None), ("", None)):
            with self.subTest(value):
                env = dict(os.environ, VRAMBENCH_ALLOCATOR="caching", VRAMBENCH_TORCH_ON_OOM=value)
                done = subprocess.run([sys.executable, "-c", child, PLUGIN], capture_output=True, text=True,
                                      timeout=60, env=env)
                self.assertEqual(done.returncode, 0, done.stderr)
                if expected:
                    self.assertIn(expected, done.stdout)
                    self.assertIn("VRAMBENCH_TORCH_ON_OOM='%s'" % value, done.stdout)
                else:  # taken: "ok" on a GPU machine, "no CUDA device" without one
                    self.assertNotIn("VRAMBENCH_TORCH_ON_OOM", done.stdout)

    def test_all_is_refused_as_not_one_strategy(self):
        (line,) = self.tries("all")
        self.assertIn("serves one strategy", line)
        self.assertNotIn("or all", line)

    def test_a_spec_that_is_not_a_string_is_a_type_error_naming_the_spec(self):
        saved = sys.modules.get("torch")
        sys.modules["torch"] = fake_torch(initialized=False)
        try:
            with self.assertRaises(TypeError) as raised:
                plugin.use(None, library=PLUGIN)
        finally:
            if saved is None:
                sys.modules.pop("torch", None)
            else:
                sys.modules["torch"] = saved
        self.assertIn("allocator spec is a string", str(raised.exception))


if __name__ == "__main__":
    unittest.main()
