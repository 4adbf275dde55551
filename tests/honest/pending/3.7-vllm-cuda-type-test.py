# vLLM's own condition for pinning the table, as the book quotes it: pinned when the DP device is CUDA
def _run_ar(should_ubatch: bool, orig_num_tokens_per_ubatch: int, padded_num_tokens_per_ubatch: int,
            cudagraph_mode: int, parallel_config: ParallelConfig) -> torch.Tensor:
    """This rank's four fields in its column of a [4, dp_size] int32 table, all-reduced over the DP group."""
    dp_size = parallel_config.data_parallel_size
    dp_rank = parallel_config.data_parallel_rank
    device, group = _get_device_and_group(parallel_config)
    pin = is_pin_memory_available() and torch.device(device).type == "cuda"
    values = torch.zeros(4, dp_size, dtype=torch.int32, pin_memory=pin)
    for row, value in enumerate((orig_num_tokens_per_ubatch, padded_num_tokens_per_ubatch, int(should_ubatch),
                                 cudagraph_mode)):
        values[row, dp_rank] = value
    values = values.to(device, non_blocking=True)
    dist.all_reduce(values, group=group)
    return values


def _synchronize_dp_ranks(num_tokens_unpadded: int, num_tokens_padded: int, should_attempt_ubatching: bool,
                          cudagraph_mode: int, parallel_config: ParallelConfig) -> tuple[bool, torch.Tensor, int]:
    """(micro-batch?, tokens per rank after padding [dp_size] on the host, CUDA-graph mode), agreed by all ranks."""
    assert num_tokens_padded >= num_tokens_unpadded
    tensor = _run_ar(should_ubatch=should_attempt_ubatching, orig_num_tokens_per_ubatch=num_tokens_unpadded,
                     padded_num_tokens_per_ubatch=num_tokens_padded, cudagraph_mode=cudagraph_mode,
                     parallel_config=parallel_config)
    return post_process(tensor.cpu(), parallel_config.num_ubatches)
