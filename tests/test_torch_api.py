"""The torch APIs synclab relies on, present and behaving as the code assumes, in whichever torch runs.

The development machine pins torch 2.13 (CPU build); the GPU machine carries its own CUDA build
(2.11 when last seen). The Python sources of both (overrides.py, utils/_python_dispatch.py,
utils/_pytree.py, cuda/__init__.py, cuda/streams.py, profiler/) and the C++ headers whose
behaviour count_syncs mirrors (ATen/native/Repeat.h, c10/cuda/CUDAFunctions.h,
c10/cuda/CUDAEvent.h, ATen/native/TensorAdvancedIndexingUtils.h) were compared: nothing the
lab uses differs. This file keeps it that way: it runs on the CPU here and on the GPU there.
"""

from __future__ import annotations

import inspect

import pytest
import torch

from synclab.device import has_cuda

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)


def _parameters(fn) -> set[str]:
    return set(inspect.signature(fn).parameters)


def test_the_modes_count_syncs_is_built_on_exist():
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten, tree_map_only

    assert callable(tree_flatten) and callable(tree_map_only)
    assert hasattr(TorchFunctionMode, "__torch_function__") and hasattr(TorchDispatchMode, "__torch_dispatch__")


def test_the_function_mode_sees_device_reads_and_scalar_reads():
    """count_syncs re-labels `t.device` inside its block and catches `.item()` at the Python level."""
    from torch.overrides import TorchFunctionMode

    seen = []

    class Spy(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append((getattr(func, "__name__", ""), getattr(getattr(func, "__self__", None), "__name__", "")))
            return func(*args, **(kwargs or {}))

    x = torch.arange(3.0)
    with Spy():
        _ = x.device
        x[1].item()
    assert ("__get__", "device") in seen and ("item", "") in seen


def test_the_dispatch_mode_sees_the_aten_ops_count_syncs_classifies():
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = []

    class Spy(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append((func.overloadpacket.__name__, func._overloadname))
            return func(*args, **(kwargs or {}))

    x = torch.arange(4.0)
    with Spy():
        x.sum().item()
        torch.equal(x, x * 1)
        torch.nonzero(x)
        x[:2].repeat_interleave(torch.tensor([1, 2]))
    names = {name for name, _ in seen}
    assert {"_local_scalar_dense", "equal", "nonzero"} <= names
    assert ("repeat_interleave", "Tensor") in seen


def test_tensor_metadata_the_equal_rule_reads():
    x = torch.arange(4.0)
    assert x.untyped_storage().data_ptr() == x[1:].untyped_storage().data_ptr()
    assert not x.is_neg() and not x.is_conj()


def test_cuda_apis_the_lab_calls_exist_with_the_arguments_it_passes():
    assert {"enable_timing", "blocking"} <= _parameters(torch.cuda.Event.__new__)
    assert callable(torch.cuda.Stream.synchronize) and callable(torch.cuda.Event.synchronize)
    for name in ("synchronize", "current_stream", "stream", "get_device_name", "set_sync_debug_mode",
                 "get_sync_debug_mode", "_sleep", "is_available"):
        assert callable(getattr(torch.cuda, name)), name
    assert hasattr(torch.version, "cuda")  # None on a CPU build


def test_profiler_apis():
    from torch.autograd.profiler import record_function
    from torch.profiler import ProfilerActivity, profile

    assert {"activities"} <= _parameters(profile.__init__)
    assert hasattr(ProfilerActivity, "CPU") and hasattr(ProfilerActivity, "CUDA") and callable(record_function)


@pytest.mark.cuda
def test_the_sync_debug_mode_warns_with_the_words_count_syncs_looks_for():
    import warnings

    x = torch.arange(4.0, device="cuda")
    previous = torch.cuda.get_sync_debug_mode()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            x.sum().item()
        finally:
            torch.cuda.set_sync_debug_mode(previous)
    from synclab.syncs import _CUDA_SYNC_WARNING

    assert any(_CUDA_SYNC_WARNING in str(w.message) for w in caught), [str(w.message) for w in caught]
