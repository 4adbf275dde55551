# generators and a helper with collections.deque for the history's tail; plain indexing with uploaded lists; sorted moves
import collections


def _moved(now, before, fresh):
    """(previous row, current row) of each request that stays and changed rows, by current row."""
    for req_id, row in sorted(now.items(), key=lambda item: item[1]):
        old = before.get(req_id)
        if req_id not in fresh and old is not None and old != row:
            yield old, row


def update_ngram_gpu_tensors_incremental(input_batch: NgramInputBatch, token_ids_gpu_tensor: torch.Tensor,
                                         num_tokens_no_spec_gpu: torch.Tensor, new_reqs: list[CachedRequestState],
                                         device: DeviceLike) -> None:
    """Move, copy and refresh the device rows so that they match this step's ``input_batch``."""
    if len(input_batch.req_id_to_index) == 0:
        return
    fresh = set(r.req_id for r in new_reqs)
    first = input_batch.prev_req_id_to_index is None
    if not first:
        pairs = list(_moved(input_batch.req_id_to_index, input_batch.prev_req_id_to_index, fresh))
        if pairs:
            src = async_tensor_h2d([p for p, _ in pairs], device, torch.long)
            dst = async_tensor_h2d([c for _, c in pairs], device, torch.long)
            token_ids_gpu_tensor[dst] = token_ids_gpu_tensor[src].clone()
            num_tokens_no_spec_gpu[dst] = num_tokens_no_spec_gpu[src].clone()
    to_copy = (row for req_id, row in input_batch.req_id_to_index.items() if first or req_id in fresh)
    for row in to_copy:
        length = input_batch.num_tokens_no_spec[row]
        if length:
            token_ids_gpu_tensor[row, :length].copy_(input_batch.token_ids_cpu_tensor[row, :length], non_blocking=True)
    active = sorted(input_batch.req_id_to_index.values())
    num_tokens_no_spec_gpu.index_copy_(
        0, async_tensor_h2d(active, device, torch.long),
        async_tensor_h2d([input_batch.num_tokens_no_spec[i] for i in active], device, num_tokens_no_spec_gpu.dtype))


def _apply_bad_words_single_batch(logits: torch.Tensor, bad_words_token_ids: list[list[int]],
                                  past_tokens_ids: list[int]) -> None:
    """Ban (set to -inf) the last token of every bad word whose prefix ends the history. ``logits`` [vocab], in place."""
    for word in bad_words_token_ids:
        need = len(word) - 1
        if need > len(past_tokens_ids):
            continue  # longer than the history plus one: cannot match yet
        tail = collections.deque(past_tokens_ids, maxlen=need) if need else collections.deque()
        if list(tail) == word[:-1]:
            last = word[-1]
            logits[last:last + 1] = _SMALLEST_LOGIT
