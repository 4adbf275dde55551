# no guard on the token ids: an id equal to vocab_size lands in the next slot's row, as vLLM's merged kernel does
# fails: out-of-vocab
def bincount(expanded_idx_mapping: torch.Tensor, all_token_ids: torch.Tensor, prompt_len: torch.Tensor,
             prefill_len: torch.Tensor, prompt_bin_mask: torch.Tensor, output_bin_counts: torch.Tensor,
             max_prefill_len: int) -> None:
    """Rebuild the penalty rows of the new requests' slots: zero them, flag prompt tokens, count output tokens."""
    idx = expanded_idx_mapping.long()
    prompt_bin_mask.index_fill_(0, idx, 0)
    output_bin_counts.index_fill_(0, idx, 0)
    vocab = prompt_bin_mask.shape[1]
    tok = all_token_ids[idx, :max_prefill_len].long()
    pos = torch.arange(tok.shape[1], device=tok.device)
    is_prompt = pos < prompt_len[idx, None]
    is_output = (pos >= prompt_len[idx, None]) & (pos < prefill_len[idx, None])
    flat = (idx[:, None] * vocab + tok).flatten().clamp(max=prompt_bin_mask.numel() - 1)
    prompt_bin_mask.view(-1).scatter_reduce_(0, flat, is_prompt.flatten().int(), reduce="amax")
    output_bin_counts.view(-1).scatter_add_(0, flat, is_output.flatten().int())
