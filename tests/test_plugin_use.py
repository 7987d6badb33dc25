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

    def test_use_before_cuda_goes_on_to_load_the_library(self):
        sys.modules["torch"] = fake_torch(initialized=False)
        with self.assertRaises(FileNotFoundError):
            plugin.use("caching", library="/nonexistent/libvrambench_torch.so")


if __name__ == "__main__":
    unittest.main()
