# moves collected as (src, dst) pairs and unzipped; index_select / index_copy_ on the device; bad words via tuple compare
def update_ngram_gpu_tensors_incremental(input_batch: NgramInputBatch, token_ids_gpu_tensor: torch.Tensor,
                                         num_tokens_no_spec_gpu: torch.Tensor, new_reqs: list[CachedRequestState],
                                         device: DeviceLike) -> None:
    """Move, copy and refresh the device rows so that they match this step's ``input_batch``."""
    now = input_batch.req_id_to_index
    if not now:
        return
    before = input_batch.prev_req_id_to_index
    fresh = {state.req_id for state in new_reqs}
    if before is not None:
        moves = [(before[rid], row) for rid, row in now.items()
                 if rid not in fresh and rid in before and before[rid] != row]
        if moves:
            src, dst = (list(side) for side in zip(*moves))
            src_dev = async_tensor_h2d(src, device, torch.int64)
            dst_dev = async_tensor_h2d(dst, device, torch.int64)
            rows = token_ids_gpu_tensor.index_select(0, src_dev)  # a new tensor: every row read before any write
            lens = num_tokens_no_spec_gpu.index_select(0, src_dev)
            token_ids_gpu_tensor.index_copy_(0, dst_dev, rows)
            num_tokens_no_spec_gpu.index_copy_(0, dst_dev, lens)
    for rid, row in now.items():
        n = input_batch.num_tokens_no_spec[row]
        if n > 0 and (before is None or rid in fresh):
            token_ids_gpu_tensor[row, :n].copy_(input_batch.token_ids_cpu_tensor[row, :n], non_blocking=True)
    rows_now = list(now.values())
    lengths = [input_batch.num_tokens_no_spec[r] for r in rows_now]
    num_tokens_no_spec_gpu.index_copy_(0, async_tensor_h2d(rows_now, device, torch.int64),
                                       async_tensor_h2d(lengths, device, num_tokens_no_spec_gpu.dtype))


def _apply_bad_words_single_batch(logits: torch.Tensor, bad_words_token_ids: list[list[int]],
                                  past_tokens_ids: list[int]) -> None:
    """Ban (set to -inf) the last token of every bad word whose prefix ends the history. ``logits`` [vocab], in place."""
    history = tuple(past_tokens_ids)
    for word in bad_words_token_ids:
        *prefix, banned = word
        if len(prefix) > len(history):
            continue
        if history[len(history) - len(prefix):] == tuple(prefix):
            logits.narrow(0, banned, 1).fill_(_SMALLEST_LOGIT)  # a one-element view: the value is a fill argument
