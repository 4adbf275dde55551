# the table zeroed on the device and each field written there (the code before the PR), then read back once
# fails: run-ar-no-syncs
def _run_ar(should_ubatch: bool, orig_num_tokens_per_ubatch: int, padded_num_tokens_per_ubatch: int,
            cudagraph_mode: int, parallel_config: ParallelConfig) -> torch.Tensor:
    """This rank's four fields in its column of a [4, dp_size] int32 table, all-reduced over the DP group."""
    device, group = _get_device_and_group(parallel_config)
    rank = parallel_config.data_parallel_rank
    table = torch.zeros(4, parallel_config.data_parallel_size, dtype=torch.int32, device=device)
    for row, value in enumerate([orig_num_tokens_per_ubatch, padded_num_tokens_per_ubatch, int(should_ubatch),
                                 cudagraph_mode]):
        table[row][rank] = value
    dist.all_reduce(table, group=group)
    return table


def _synchronize_dp_ranks(num_tokens_unpadded: int, num_tokens_padded: int, should_attempt_ubatching: bool,
                          cudagraph_mode: int, parallel_config: ParallelConfig) -> tuple[bool, torch.Tensor, int]:
    """(micro-batch?, tokens per rank after padding [dp_size] on the host, CUDA-graph mode), agreed by all ranks."""
    table = _run_ar(should_ubatch=should_attempt_ubatching, orig_num_tokens_per_ubatch=num_tokens_unpadded,
                    padded_num_tokens_per_ubatch=num_tokens_padded, cudagraph_mode=cudagraph_mode,
                    parallel_config=parallel_config)
    return post_process(table.cpu(), parallel_config.num_ubatches)
