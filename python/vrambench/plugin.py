"""vrambench's allocator strategies inside PyTorch (standard library + torch).

    from vrambench import plugin                # python/ on sys.path, or pip-installed
    plugin.use("stitch")                        # before the first CUDA call
    ...train...
    plugin.memory_stats()["reserved_bytes.all.peak"]
    plugin.empty_cache()

use(SPEC) loads libvrambench_torch.so (`make plugin`; the path given,
$VRAMBENCH_TORCH_LIB, a copy next to this module, or the checkout's build/), checks SPEC (any `vrambench list allocators`
strategy with options, e.g. "caching[max_split_size_mb=256]"; a bad one
raises ValueError with the plug-in's one-line message) and installs it with
torch.cuda.memory.CUDAPluggableAllocator + change_current_allocator.

Call use() before anything initialises CUDA in PyTorch, torch.cuda.set_device
included: PyTorch cannot swap its allocator after that ("Can't swap an
already initialized allocator"), so use() raises RuntimeError saying so.
With several GPUs (DDP, one process per rank), call use() first and then
torch.cuda.set_device(rank). Every GPU gets its own allocator of the strategy,
and the memory it hands out is open to every GPU that can access it (mappings
and pools too), so copies between devices work with every strategy.

Under a pluggable allocator PyTorch's own statistics are gone:
torch.cuda.memory_stats(), memory_reserved(), max_memory_allocated() and
reset_peak_memory_stats() raise ("CUDAPluggableAllocator does not yet support
getDeviceStats"), and torch.cuda.empty_cache() does nothing (it calls a reset
function that CUDAPluggableAllocator's Python constructor cannot set). So
memory_stats() here answers from the plug-in under PyTorch's stat names, and
use(..., patch_torch=True) (the default) points those torch.cuda functions
at this module, so unchanged PyTorch code (the documents' own) measures and
empties the vrambench strategy.
"""
import ctypes
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
LIBRARY_NAME = "libvrambench_torch.so"
# Where the library is looked for after `path` and $VRAMBENCH_TORCH_LIB: next
# to this module (`make plugin` puts a copy there, so `pip install .` and
# `make install` carry it), then the checkout's build/ (run from the repository).
LIBRARY_CANDIDATES = (
    os.path.join(_HERE, LIBRARY_NAME),
    os.path.join(os.path.dirname(os.path.dirname(_HERE)), "build", LIBRARY_NAME),
)

_library = None
_fields = ()  # the names of vb_torch_stats's figures, in its order, from the library
_spec = None


def library_path(path=None):
    """The plug-in to load: `path`, $VRAMBENCH_TORCH_LIB, or the first of
    LIBRARY_CANDIDATES that exists; FileNotFoundError naming where it looked."""
    chosen = path or os.environ.get("VRAMBENCH_TORCH_LIB")
    if chosen:
        if not os.path.isfile(chosen):
            what = "a folder, not the library" if os.path.isdir(chosen) else "no such file"
            raise FileNotFoundError(f"{chosen}: {what} (the vrambench plug-in: make plugin builds it)")
        return os.path.abspath(chosen)
    for candidate in LIBRARY_CANDIDATES:
        if os.path.isfile(candidate):
            return candidate
    raise FileNotFoundError(f"{LIBRARY_NAME} not found (looked in {', '.join(LIBRARY_CANDIDATES)}): "
                            "build it with `make plugin` in the vrambench checkout, then `pip install .` "
                            "again, or set VRAMBENCH_TORCH_LIB to its path")


def use(spec, library=None, patch_torch=True):
    """Installs vrambench strategy `spec` as PyTorch's CUDA allocator. Must run
    before any CUDA call in PyTorch, torch.cuda.set_device included
    (change_current_allocator refuses later): RuntimeError otherwise."""
    global _library, _spec, _fields
    import torch
    if torch.cuda.is_initialized():
        raise RuntimeError(
            "vrambench.plugin.use() must be called before any CUDA call in PyTorch (torch.cuda.set_device "
            "included): CUDA is initialised already and PyTorch cannot swap its allocator then (\"Can't swap an "
            "already initialized allocator\"); call use() first, then torch.cuda.set_device(rank)")
    if not isinstance(spec, str):
        raise TypeError(f"vrambench.plugin.use(): the allocator spec is a string such as \"stitch\" or "
                        f"\"caching[max_split_size_mb=256]\", not {type(spec).__name__}")
    if not spec:
        # said here, before the library loads (the plug-in itself says VRAMBENCH_ALLOCATOR is empty)
        raise ValueError("vrambench.plugin.use(): the allocator spec is empty (a vrambench allocator spec: stitch, "
                         "caching[max_split_size_mb=256], ...)")
    path = library_path(library)
    previous = os.environ.get("VRAMBENCH_ALLOCATOR")
    os.environ["VRAMBENCH_ALLOCATOR"] = spec
    try:
        lib = ctypes.CDLL(path)
        lib.vb_torch_init.restype = ctypes.c_char_p
        lib.vb_torch_stat_names.restype = ctypes.c_char_p
        lib.vb_torch_stats.argtypes = (ctypes.c_int, ctypes.POINTER(ctypes.c_uint64), ctypes.c_int)
        lib.vb_torch_stats.restype = ctypes.c_int
        lib.vb_torch_reset_peak_stats.argtypes = (ctypes.c_int,)
        error = lib.vb_torch_init()
        if error:
            raise ValueError(error.decode())
    except BaseException:
        # a refused spec (or library) is not left behind for child processes or a later use()
        if previous is None:
            os.environ.pop("VRAMBENCH_ALLOCATOR", None)
        else:
            os.environ["VRAMBENCH_ALLOCATOR"] = previous
        raise
    allocator = torch.cuda.memory.CUDAPluggableAllocator(path, "vb_torch_malloc", "vb_torch_free")
    torch.cuda.memory.change_current_allocator(allocator)
    _fields = tuple(name for name in lib.vb_torch_stat_names().decode().split(",") if name)
    _library, _spec = lib, spec
    if patch_torch:
        _patch(torch)
    return allocator


def spec():
    """The installed strategy, or None."""
    return _spec


def _device_index(device):
    import torch
    if device is None:
        return torch.cuda.current_device()
    if isinstance(device, int):
        return device
    return torch.device(device).index or 0


def raw_stats(device=None):
    """The plug-in's statistics of `device` as a dict (zeros before its first allocation)."""
    if _library is None:
        raise RuntimeError("vrambench.plugin.use() was not called")
    values = (ctypes.c_uint64 * len(_fields))()
    if _library.vb_torch_stats(_device_index(device), values, len(_fields)) != len(_fields):
        return {name: 0 for name in _fields}
    return dict(zip(_fields, values))


def memory_stats(device=None):
    """The plug-in's statistics under PyTorch's memory_stats() names (the
    subset vrambench keeps; "all" pool only), plus vrambench.* extras."""
    s = raw_stats(device)
    out = {}
    for kind in ("requested", "allocated", "reserved"):
        out[f"{kind}_bytes.all.current"] = s[f"{kind}_bytes"]
        out[f"{kind}_bytes.all.peak"] = s[f"{kind}_bytes_peak"]
    out["num_device_alloc"] = s["driver_alloc_calls"]
    out["num_device_free"] = s["driver_free_calls"]
    out["num_alloc_retries"] = s["alloc_retries"]
    out["num_ooms"] = s["ooms"]
    out["inactive_split_bytes.all.current"] = s["free_cached_bytes"]
    out["vrambench.free_cached_bytes"] = s["free_cached_bytes"]
    out["vrambench.largest_free_block"] = s["largest_free_block"]
    out["vrambench.allocator"] = _spec
    return out


def empty_cache():
    """Returns every cached byte of the strategy to the driver."""
    if _library is not None:
        _library.vb_torch_empty_cache()


def reset_peak_memory_stats(device=None):
    """Peaks start again from the current values."""
    if _library is not None:
        _library.vb_torch_reset_peak_stats(_device_index(device))


def memory_reserved(device=None):
    return memory_stats(device)["reserved_bytes.all.current"]


def max_memory_reserved(device=None):
    return memory_stats(device)["reserved_bytes.all.peak"]


def memory_allocated(device=None):
    return memory_stats(device)["allocated_bytes.all.current"]


def max_memory_allocated(device=None):
    return memory_stats(device)["allocated_bytes.all.peak"]


def _patch(torch):
    """Points torch.cuda's statistics and empty_cache at the plug-in (see the top)."""
    replacements = {"memory_stats": memory_stats, "empty_cache": empty_cache,
                    "reset_peak_memory_stats": reset_peak_memory_stats,
                    "memory_reserved": memory_reserved, "max_memory_reserved": max_memory_reserved,
                    "memory_allocated": memory_allocated, "max_memory_allocated": max_memory_allocated}
    for name, function in replacements.items():
        setattr(torch.cuda, name, function)
        setattr(torch.cuda.memory, name, function)
