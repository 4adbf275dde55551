# a module-level logger, a constant and a functools.partial computed by calls; the column written in one host assignment
import functools
import logging

from synclab.engine.dp_utils import FIELDS

logger = logging.getLogger(__name__)
NUM_FIELDS = len(FIELDS)
_int32_table = functools.partial(torch.zeros, dtype=torch.int32)


def _run_ar(should_ubatch: bool, orig_num_tokens_per_ubatch: int, padded_num_tokens_per_ubatch: int,
            cudagraph_mode: int, parallel_config: ParallelConfig) -> torch.Tensor:
    """This rank's four fields in its column of a [4, dp_size] int32 table, all-reduced over the DP group."""
    device, group = _get_device_and_group(parallel_config)
    pin = is_pin_memory_available() and not is_host(device)  # the CPU group never uploads: nothing to pin for
    host = _int32_table(NUM_FIELDS, parallel_config.data_parallel_size, pin_memory=pin)
    host[:, parallel_config.data_parallel_rank] = torch.tensor(
        [orig_num_tokens_per_ubatch, padded_num_tokens_per_ubatch, int(should_ubatch), cudagraph_mode],
        dtype=torch.int32)  # host to host
    table = host.to(device, non_blocking=True)
    dist.all_reduce(table, group=group)
    logger.debug("rank %d: all-reduced its column", parallel_config.data_parallel_rank)
    return table


def _synchronize_dp_ranks(num_tokens_unpadded: int, num_tokens_padded: int, should_attempt_ubatching: bool,
                          cudagraph_mode: int, parallel_config: ParallelConfig) -> tuple[bool, torch.Tensor, int]:
    """(micro-batch?, tokens per rank after padding [dp_size] on the host, CUDA-graph mode), agreed by all ranks."""
    if num_tokens_padded < num_tokens_unpadded:
        raise ValueError(f"padded ({num_tokens_padded}) < unpadded ({num_tokens_unpadded})")
    reduced = _run_ar(should_ubatch=should_attempt_ubatching, orig_num_tokens_per_ubatch=num_tokens_unpadded,
                      padded_num_tokens_per_ubatch=num_tokens_padded, cudagraph_mode=cudagraph_mode,
                      parallel_config=parallel_config)
    on_host = reduced.to("cpu")  # the one read back
    return post_process(on_host, parallel_config.num_ubatches)
