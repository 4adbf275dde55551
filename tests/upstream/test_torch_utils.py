"""``async_tensor_h2d``, translated from vLLM's ``tests/utils_/test_torch_utils.py::test_async_tensor_h2d_staging``.

That test is from vLLM after PR #45424 (merged June 2026), whose signature the lab's Exercise
3.1 uses: ``async_tensor_h2d(data, device, dtype=None)``. (At #41429, the PR chapter 3 follows,
it was ``async_tensor_h2d(data, dtype, target_device, pin_memory)``; the lab teaches #45424's
form.) Its case: a list ``[1, 2, 3]`` with ``dtype=torch.int32`` equals
``torch.tensor([1, 2, 3], dtype=torch.int32, device=device)``.

The NumPy and tensor inputs below are not upstream cases: they are the other two kinds of
data #45424's function accepts (a NumPy array through ``torch.from_numpy``, a CPU tensor as
is), written from its description.

Under test: Exercise 3.1's ``async_tensor_h2d`` and the lab's ``async_tensor_h2d_baseline``
(before #41429: a blocking upload, same values). ``device`` is the lab's device (a GPU, or
the CPU standing in for one) and the plain CPU, as vLLM parametrizes over its devices.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from synclab.device import pick_device
from synclab.engine.torch_utils import async_tensor_h2d_baseline
from tests.upstream.adapters import solution

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

IMPLS = {"solution": solution(3, "async_tensor_h2d"), "baseline": async_tensor_h2d_baseline}
DEVICES = {"lab device": pick_device(), "cpu": "cpu"}


def _device_type(device) -> str:
    return torch.device(device).type


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("device", DEVICES)
def test_async_tensor_h2d_staging(impl: str, device: str) -> None:
    """test_async_tensor_h2d_staging: a list with dtype int32 arrives as that tensor on the device."""
    target = DEVICES[device]
    got = IMPLS[impl]([1, 2, 3], device=target, dtype=torch.int32)
    torch.testing.assert_close(got, torch.tensor([1, 2, 3], dtype=torch.int32, device=target))  # dtype checked too
    assert got.device.type == _device_type(target)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("data", [np.array([4, 5, 6], dtype=np.int64), torch.tensor([4, 5, 6])],
                         ids=["numpy", "cpu tensor"])
def test_numpy_and_tensor_inputs_since_45424(impl: str, data) -> None:
    """Not an upstream case: #45424's other inputs, converted to ``dtype`` on the way; the source is untouched."""
    device = pick_device()
    got = IMPLS[impl](data, device=device, dtype=torch.int32)
    torch.testing.assert_close(got, torch.tensor([4, 5, 6], dtype=torch.int32, device=device))
    assert data.tolist() == [4, 5, 6]
