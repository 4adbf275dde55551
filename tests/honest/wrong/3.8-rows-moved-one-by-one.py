# moved rows copied one by one through slices, in place: a swap overwrites a row before it is read
# fails: ngram-scripted
def update_ngram_gpu_tensors_incremental(input_batch: NgramInputBatch, token_ids_gpu_tensor: torch.Tensor,
                                         num_tokens_no_spec_gpu: torch.Tensor, new_reqs: list[CachedRequestState],
                                         device: DeviceLike) -> None:
    """Move, copy and refresh the device rows so that they match this step's ``input_batch``."""
    cur, prev = input_batch.req_id_to_index, input_batch.prev_req_id_to_index
    if not cur:
        return
    new = {r.req_id for r in new_reqs}
    if prev is not None:
        for r, i in cur.items():
            if r not in new and r in prev and prev[r] != i:
                j = prev[r]
                token_ids_gpu_tensor[i:i + 1] = token_ids_gpu_tensor[j:j + 1]
                num_tokens_no_spec_gpu[i:i + 1] = num_tokens_no_spec_gpu[j:j + 1]
    for r, i in cur.items():
        n = input_batch.num_tokens_no_spec[i]
        if n and (prev is None or r in new):
            token_ids_gpu_tensor[i, :n].copy_(input_batch.token_ids_cpu_tensor[i, :n], non_blocking=True)
    rows = list(cur.values())
    num_tokens_no_spec_gpu.index_copy_(0, async_tensor_h2d(rows, device, torch.long),
                                       async_tensor_h2d([input_batch.num_tokens_no_spec[i] for i in rows], device,
                                                        num_tokens_no_spec_gpu.dtype))


def _apply_bad_words_single_batch(logits: torch.Tensor, bad_words_token_ids: list[list[int]],
                                  past_tokens_ids: list[int]) -> None:
    """Ban (set to -inf) the last token of every bad word whose prefix ends the history. ``logits`` [vocab], in place."""
    for word in bad_words_token_ids:
        k = len(word) - 1
        if k <= len(past_tokens_ids) and (k == 0 or past_tokens_ids[-k:] == word[:-1]):
            logits[word[-1]:word[-1] + 1] = _SMALLEST_LOGIT
