# the table built and uploaded right, but vLLM's readers run on the device tensor: one sync per .item()
# fails: dp-ranks-one-sync
def _run_ar(should_ubatch: bool, orig_num_tokens_per_ubatch: int, padded_num_tokens_per_ubatch: int,
            cudagraph_mode: int, parallel_config: ParallelConfig) -> torch.Tensor:
    """This rank's four fields in its column of a [4, dp_size] int32 table, all-reduced over the DP group."""
    device, group = _get_device_and_group(parallel_config)
    rank = parallel_config.data_parallel_rank
    host = torch.zeros(4, parallel_config.data_parallel_size, dtype=torch.int32,
                       pin_memory=is_pin_memory_available() and not is_host(device))
    host[:, rank] = torch.tensor([orig_num_tokens_per_ubatch, padded_num_tokens_per_ubatch, int(should_ubatch),
                                  cudagraph_mode], dtype=torch.int32)
    table = host.to(device, non_blocking=True)
    dist.all_reduce(table, group=group)
    return table


def _synchronize_dp_ranks(num_tokens_unpadded: int, num_tokens_padded: int, should_attempt_ubatching: bool,
                          cudagraph_mode: int, parallel_config: ParallelConfig) -> tuple[bool, torch.Tensor, int]:
    """(micro-batch?, tokens per rank after padding [dp_size] on the host, CUDA-graph mode), agreed by all ranks."""
    table = _run_ar(should_ubatch=should_attempt_ubatching, orig_num_tokens_per_ubatch=num_tokens_unpadded,
                    padded_num_tokens_per_ubatch=num_tokens_padded, cudagraph_mode=cudagraph_mode,
                    parallel_config=parallel_config)
    return post_process(table, parallel_config.num_ubatches)
