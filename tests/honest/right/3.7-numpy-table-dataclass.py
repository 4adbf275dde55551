# a frozen dataclass for this rank's fields, a numpy table wrapped with torch.from_numpy, readers on a host copy
from dataclasses import astuple, dataclass


@dataclass(frozen=True)
class _Contribution:
    orig: int
    padded: int
    ubatch: int
    mode: int


def _run_ar(should_ubatch: bool, orig_num_tokens_per_ubatch: int, padded_num_tokens_per_ubatch: int,
            cudagraph_mode: int, parallel_config: ParallelConfig) -> torch.Tensor:
    """This rank's four fields in its column of a [4, dp_size] int32 table, all-reduced over the DP group."""
    mine = _Contribution(orig_num_tokens_per_ubatch, padded_num_tokens_per_ubatch, 1 if should_ubatch else 0,
                         cudagraph_mode)
    device, group = _get_device_and_group(parallel_config)
    grid = np.zeros((len(astuple(mine)), parallel_config.data_parallel_size), dtype=np.int32)
    grid[:, parallel_config.data_parallel_rank] = astuple(mine)
    host = torch.from_numpy(grid)
    if not is_host(device) and is_pin_memory_available():
        host = host.pin_memory()
    shared = host.to(device, non_blocking=True)
    dist.all_reduce(shared, op=dist.ReduceOp.SUM, group=group)
    return shared


def _synchronize_dp_ranks(num_tokens_unpadded: int, num_tokens_padded: int, should_attempt_ubatching: bool,
                          cudagraph_mode: int, parallel_config: ParallelConfig) -> tuple[bool, torch.Tensor, int]:
    """(micro-batch?, tokens per rank after padding [dp_size] on the host, CUDA-graph mode), agreed by all ranks."""
    assert num_tokens_padded >= num_tokens_unpadded, "padding never removes tokens"
    table = _run_ar(should_attempt_ubatching, num_tokens_unpadded, num_tokens_padded, cudagraph_mode,
                    parallel_config).cpu()
    return post_process(table, parallel_config.num_ubatches)
