# bad words: the banned tokens collected in a set, then ONE index_fill_ with an index uploaded by async_tensor_h2d
def update_ngram_gpu_tensors_incremental(input_batch: NgramInputBatch, token_ids_gpu_tensor: torch.Tensor,
                                         num_tokens_no_spec_gpu: torch.Tensor, new_reqs: list[CachedRequestState],
                                         device: DeviceLike) -> None:
    """Move, copy and refresh the device rows so that they match this step's ``input_batch``."""
    current = input_batch.req_id_to_index
    if not current:
        return
    previous = input_batch.prev_req_id_to_index
    new_ids = {r.req_id for r in new_reqs}
    src_rows, dst_rows, copy_rows = [], [], []
    for req_id, row in current.items():
        if previous is None or req_id in new_ids:
            copy_rows.append(row)
        elif req_id in previous and previous[req_id] != row:
            src_rows.append(previous[req_id])
            dst_rows.append(row)
    if src_rows:
        src = async_tensor_h2d(src_rows, device, torch.long)
        dst = async_tensor_h2d(dst_rows, device, torch.long)
        moved_tokens = token_ids_gpu_tensor[src].clone()
        moved_lens = num_tokens_no_spec_gpu[src].clone()
        token_ids_gpu_tensor.index_copy_(0, dst, moved_tokens)
        num_tokens_no_spec_gpu.index_copy_(0, dst, moved_lens)
    for row in copy_rows:
        k = input_batch.num_tokens_no_spec[row]
        if k > 0:
            token_ids_gpu_tensor[row, :k].copy_(input_batch.token_ids_cpu_tensor[row, :k], non_blocking=True)
    rows = list(current.values())
    new_lens = async_tensor_h2d([input_batch.num_tokens_no_spec[r] for r in rows], device, num_tokens_no_spec_gpu.dtype)
    num_tokens_no_spec_gpu.index_copy_(0, async_tensor_h2d(rows, device, torch.long), new_lens)


def _apply_bad_words_single_batch(logits: torch.Tensor, bad_words_token_ids: list[list[int]],
                                  past_tokens_ids: list[int]) -> None:
    """Ban (set to -inf) the last token of every bad word whose prefix ends the history. ``logits`` [vocab], in place."""
    n = len(past_tokens_ids)
    banned = {w[-1] for w in bad_words_token_ids
              if len(w) <= n + 1 and past_tokens_ids[n - (len(w) - 1):] == w[:-1]}
    if banned:
        where = async_tensor_h2d(sorted(banned), logits.device, torch.long)
        logits.index_fill_(0, where, _SMALLEST_LOGIT)
