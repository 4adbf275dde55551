# the all-reduce issued with async_op=True and waited on through its work handle (work.wait()), as distributed code often does
def _run_ar(should_ubatch: bool, orig_num_tokens_per_ubatch: int, padded_num_tokens_per_ubatch: int,
            cudagraph_mode: int, parallel_config: ParallelConfig) -> torch.Tensor:
    """This rank's four fields in its column of a [4, dp_size] int32 table, all-reduced over the DP group."""
    device, group = _get_device_and_group(parallel_config)
    rank = parallel_config.data_parallel_rank
    host = torch.zeros(4, parallel_config.data_parallel_size, dtype=torch.int32,
                       pin_memory=is_pin_memory_available() and not is_host(device))
    for row, value in enumerate((orig_num_tokens_per_ubatch, padded_num_tokens_per_ubatch, int(should_ubatch),
                                 cudagraph_mode)):
        host[row, rank] = value
    table = host.to(device, non_blocking=True)
    work = dist.all_reduce(table, group=group, async_op=True)
    work.wait()
    return table


def _synchronize_dp_ranks(num_tokens_unpadded: int, num_tokens_padded: int, should_attempt_ubatching: bool,
                          cudagraph_mode: int, parallel_config: ParallelConfig) -> tuple[bool, torch.Tensor, int]:
    """(micro-batch?, tokens per rank after padding [dp_size] on the host, CUDA-graph mode), agreed by all ranks."""
    assert num_tokens_padded >= num_tokens_unpadded
    table = _run_ar(should_ubatch=should_attempt_ubatching, orig_num_tokens_per_ubatch=num_tokens_unpadded,
                    padded_num_tokens_per_ubatch=num_tokens_padded, cudagraph_mode=cudagraph_mode,
                    parallel_config=parallel_config)
    return post_process(table.cpu(), parallel_config.num_ubatches)
