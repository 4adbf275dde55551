# the one read back done with .tolist() (rows as Python lists), the readers run on a host tensor rebuilt from them;
# the four fields zipped with their row numbers; the pin flag computed by a small nested helper
def _run_ar(should_ubatch: bool, orig_num_tokens_per_ubatch: int, padded_num_tokens_per_ubatch: int,
            cudagraph_mode: int, parallel_config: ParallelConfig) -> torch.Tensor:
    """This rank's four fields in its column of a [4, dp_size] int32 table, all-reduced over the DP group."""
    device, group = _get_device_and_group(parallel_config)

    def wants_pinning() -> bool:
        return False if is_host(device) else is_pin_memory_available()

    column = (orig_num_tokens_per_ubatch, padded_num_tokens_per_ubatch, int(bool(should_ubatch)), cudagraph_mode)
    table_cpu = torch.zeros((len(column), parallel_config.data_parallel_size), dtype=torch.int32,
                            pin_memory=wants_pinning())
    for field_row, value in zip(range(len(column)), column):
        table_cpu[field_row, parallel_config.data_parallel_rank] = value
    reduced = table_cpu.to(device, non_blocking=True)
    dist.all_reduce(reduced, group=group)
    return reduced


def _synchronize_dp_ranks(num_tokens_unpadded: int, num_tokens_padded: int, should_attempt_ubatching: bool,
                          cudagraph_mode: int, parallel_config: ParallelConfig) -> tuple[bool, torch.Tensor, int]:
    """(micro-batch?, tokens per rank after padding [dp_size] on the host, CUDA-graph mode), agreed by all ranks."""
    assert num_tokens_padded >= num_tokens_unpadded, (num_tokens_padded, num_tokens_unpadded)
    rows = _run_ar(should_ubatch=should_attempt_ubatching, orig_num_tokens_per_ubatch=num_tokens_unpadded,
                   padded_num_tokens_per_ubatch=num_tokens_padded, cudagraph_mode=cudagraph_mode,
                   parallel_config=parallel_config).tolist()  # the one read back
    return post_process(torch.tensor(rows, dtype=torch.int32), parallel_config.num_ubatches)
