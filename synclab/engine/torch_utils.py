"""Uploading host data to the device: vLLM's ``async_tensor_h2d`` and the code it replaced.

Taught in chapter 3 (pinned ``non_blocking`` transfers). The reader writes
``async_tensor_h2d`` in Exercise 3.1; this module holds the baseline (the checks keep
their reference in the chapter's checks room).

Before PR #41429, index tensors went to the device with ``torch.tensor(data,
device=...)``: a synchronous copy, so the host waited for it (and for everything
queued before it) on every call.
"""

from __future__ import annotations

from typing import Any, Sequence, Union

import numpy as np
import torch

from synclab.device import DeviceLike
from synclab.answer_keys import answer_key  # marks the package's versions: no answer may call them


HostData = Union[Sequence[Any], np.ndarray, torch.Tensor]  # a (nested) list, a NumPy array or a CPU tensor


@answer_key("3.1", role="vLLM's code before #41429", scope="checks")
def async_tensor_h2d_baseline(data: HostData, device: DeviceLike, dtype: torch.dtype | None = None) -> torch.Tensor:
    """What the call sites did before PR #41429 (``torch.tensor(data, device=...)``): the host waits for the copy."""
    if isinstance(data, np.ndarray):
        data = torch.from_numpy(data)
    if isinstance(data, torch.Tensor):
        return data.to(device=device, dtype=dtype)
    return torch.tensor(data, dtype=dtype, device=device)
