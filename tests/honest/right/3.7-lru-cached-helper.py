# functools.lru_cache on a small helper (the table's shape per DP size), called from _run_ar on each rank
import functools


@functools.lru_cache(maxsize=None)
def _table_shape(dp_size: int) -> tuple[int, int]:
    return (4, dp_size)


def _run_ar(should_ubatch: bool, orig_num_tokens_per_ubatch: int, padded_num_tokens_per_ubatch: int,
            cudagraph_mode: int, parallel_config: ParallelConfig) -> torch.Tensor:
    """This rank's four fields in its column of a [4, dp_size] int32 table, all-reduced over the DP group."""
    device, group = _get_device_and_group(parallel_config)
    host = torch.zeros(_table_shape(parallel_config.data_parallel_size), dtype=torch.int32,
                       pin_memory=is_pin_memory_available() and not is_host(device))
    rank = parallel_config.data_parallel_rank
    host[0, rank] = orig_num_tokens_per_ubatch
    host[1, rank] = padded_num_tokens_per_ubatch
    host[2, rank] = int(should_ubatch)
    host[3, rank] = cudagraph_mode
    out = host.to(device, non_blocking=True)
    dist.all_reduce(out, group=group)
    return out


def _synchronize_dp_ranks(num_tokens_unpadded: int, num_tokens_padded: int, should_attempt_ubatching: bool,
                          cudagraph_mode: int, parallel_config: ParallelConfig) -> tuple[bool, torch.Tensor, int]:
    """(micro-batch?, tokens per rank after padding [dp_size] on the host, CUDA-graph mode), agreed by all ranks."""
    assert num_tokens_padded >= num_tokens_unpadded
    table = _run_ar(should_ubatch=should_attempt_ubatching, orig_num_tokens_per_ubatch=num_tokens_unpadded,
                    padded_num_tokens_per_ubatch=num_tokens_padded, cudagraph_mode=cudagraph_mode,
                    parallel_config=parallel_config).cpu()
    return post_process(table, parallel_config.num_ubatches)
