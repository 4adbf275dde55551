"""Data-parallel coordination of vLLM's V1 worker (``vllm/v1/worker/dp_utils.py``): ``_run_ar`` and its readers.

Taught in chapter 3 (pinned ``non_blocking`` transfers), Exercise 3.7. Before each
step, every data-parallel (DP) rank tells the others four things: how many tokens it
will run, how many after its own padding, whether it wants to split the batch into
micro-batches, and its CUDA-graph mode. vLLM packs them into one int32 tensor
``[4, dp_size]``; each rank fills its own column, leaves the others 0, and an
all-reduce (a sum) gives every rank the whole table. The ranks then read it back to
agree on micro-batching, padding and the CUDA-graph mode.

* :func:`_run_ar_baseline` — before PR #41429: the tensor is created on the device
  and each field written with ``tensor[field][rank] = value``. The Python int arrives
  as a 0-d host tensor and is copied over, blocking: one sync per field.
* :func:`_synchronize_dp_ranks_baseline` — vLLM's readers, run on the device tensor:
  every ``.item()`` and ``.cpu()`` is one more sync.

The reader writes ``_run_ar`` (fields written into a pinned host tensor, one
``non_blocking`` upload, the all-reduce) and ``_synchronize_dp_ranks`` (one read back,
then the same readers on the host copy). The process group comes from
:class:`synclab.pinned_transfers.ranks.RankGroup`, which sets the group returned by :func:`get_dp_group`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from synclab.device import DeviceLike
from synclab.answer_keys import answer_key  # marks the package's versions: no answer may call them


FIELDS = ("orig_num_tokens", "padded_num_tokens", "should_ubatch", "cudagraph_mode")  # the rows of the tensor


@dataclass
class ParallelConfig:
    """The part of vLLM's ``ParallelConfig`` the DP coordination reads."""

    data_parallel_size: int
    data_parallel_rank: int
    num_ubatches: int = 2
    disable_nccl_for_dp_synchronization: bool = False  # all-reduce on host tensors over the CPU group


@dataclass
class DPGroup:
    """vLLM's ``get_dp_group()``: this rank's device, and a device group and a CPU (gloo) group."""

    rank: int
    world_size: int
    device: DeviceLike  # where the device group's collectives run (CUDA, or the simulated device)
    device_group: Any  # a torch.distributed ProcessGroup: NCCL with a GPU per rank, else gloo
    cpu_group: Any  # a gloo ProcessGroup over host tensors


_DP_GROUP: list[DPGroup] = []


def set_dp_group(group: DPGroup | None) -> None:
    """Install this process's DP group (``synclab.pinned_transfers.ranks`` does, in each rank)."""
    _DP_GROUP.clear()
    if group is not None:
        _DP_GROUP.append(group)


def get_dp_group() -> DPGroup:
    if not _DP_GROUP:
        raise RuntimeError("no data-parallel group in this process: the DP functions run inside the ranks of "
                           "synclab.pinned_transfers.ranks.RankGroup (the chapter 3 checks start one)")
    return _DP_GROUP[0]


def _get_device_and_group(parallel_config: ParallelConfig) -> tuple[DeviceLike, Any]:
    """The device and group of the all-reduce: the device group, or host tensors over the CPU group."""
    group = get_dp_group()
    if parallel_config.disable_nccl_for_dp_synchronization:
        return torch.device("cpu"), group.cpu_group
    return group.device, group.device_group


@answer_key("3.7", role="vLLM's code before #41429", scope="checks")
def _run_ar_baseline(should_ubatch: bool, orig_num_tokens_per_ubatch: int, padded_num_tokens_per_ubatch: int,
                     cudagraph_mode: int, parallel_config: ParallelConfig) -> torch.Tensor:
    """Before PR #41429: the table built on the device, one blocking copy per field written."""
    dp_size = parallel_config.data_parallel_size
    dp_rank = parallel_config.data_parallel_rank
    device, group = _get_device_and_group(parallel_config)
    tensor = torch.zeros(4, dp_size, device=device, dtype=torch.int32)  # [4, dp_size]
    tensor[0][dp_rank] = orig_num_tokens_per_ubatch  # each write: a 0-d host tensor copied over, blocking
    tensor[1][dp_rank] = padded_num_tokens_per_ubatch
    tensor[2][dp_rank] = 1 if should_ubatch else 0
    tensor[3][dp_rank] = cudagraph_mode
    dist.all_reduce(tensor, group=group)
    return tensor


def is_last_ubatch_empty(orig_num_tokens: int, padded_num_tokens: int, num_ubatches: int) -> bool:
    """vLLM's ``ubatch_utils``: the last micro-batch would hold only padding."""
    return (padded_num_tokens // num_ubatches) * (num_ubatches - 1) >= orig_num_tokens


def _post_process_ubatch(tensor: torch.Tensor, num_ubatches: int) -> bool:
    """Micro-batch only if every rank wants to and no rank's last micro-batch would be empty."""
    orig_num_tokens_tensor = tensor[0, :]  # [dp_size]
    padded_num_tokens_tensor = tensor[1, :]  # [dp_size]
    should_ubatch = bool(torch.all(tensor[2] == 1).item())
    if not should_ubatch:
        return False
    orig_min_num_tokens = int(orig_num_tokens_tensor.min().item())
    padded_max_num_tokens = int(padded_num_tokens_tensor.max().item())
    return not is_last_ubatch_empty(orig_min_num_tokens, padded_max_num_tokens, num_ubatches)


def _post_process_dp_padding(tensor: torch.Tensor, should_dp_pad: bool) -> torch.Tensor:
    """Tokens per rank after DP padding, as a host tensor: every rank padded to the largest when padding."""
    num_tokens_across_dp = tensor[1, :]  # [dp_size]
    if should_dp_pad:
        max_num_tokens = int(num_tokens_across_dp.max().item())
        return torch.tensor([max_num_tokens] * len(num_tokens_across_dp), device="cpu", dtype=torch.int32)
    return num_tokens_across_dp.cpu()


def _post_process_cudagraph_mode(tensor: torch.Tensor) -> int:
    """The CUDA-graph mode every rank uses: the lowest asked for (0, none, wins)."""
    return int(tensor[3, :].min().item())


def post_process(tensor: torch.Tensor, num_ubatches: int) -> tuple[bool, torch.Tensor, int]:
    """vLLM's readers in vLLM's order: the mode, then micro-batching, then padding (which depends on both)."""
    synced_cudagraph_mode = _post_process_cudagraph_mode(tensor)
    should_ubatch = _post_process_ubatch(tensor, num_ubatches)
    should_dp_pad = synced_cudagraph_mode != 0 or should_ubatch
    num_tokens_after_padding = _post_process_dp_padding(tensor, should_dp_pad)
    return should_ubatch, num_tokens_after_padding, synced_cudagraph_mode


@answer_key("3.7", role="vLLM's code before #41429", scope="checks")
def _synchronize_dp_ranks_baseline(num_tokens_unpadded: int, num_tokens_padded: int, should_attempt_ubatching: bool,
                                   cudagraph_mode: int,
                                   parallel_config: ParallelConfig) -> tuple[bool, torch.Tensor, int]:
    """Before PR #41429: the baseline all-reduce, then vLLM's readers on the device tensor (a sync per read)."""
    assert num_tokens_padded >= num_tokens_unpadded
    tensor = _run_ar_baseline(should_ubatch=should_attempt_ubatching, orig_num_tokens_per_ubatch=num_tokens_unpadded,
                              padded_num_tokens_per_ubatch=num_tokens_padded, cudagraph_mode=cudagraph_mode,
                              parallel_config=parallel_config)
    return post_process(tensor, parallel_config.num_ubatches)


Contribution = tuple[bool, int, int, int]  # (should_ubatch, orig_num_tokens, padded_num_tokens, cudagraph_mode)
