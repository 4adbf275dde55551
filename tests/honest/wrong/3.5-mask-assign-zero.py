# rows zeroed with x[idx] = 0 (what vLLM #34662 merged): the host's 0 copied over inside index_put_
# fails: no-syncs
def bincount(expanded_idx_mapping: torch.Tensor, all_token_ids: torch.Tensor, prompt_len: torch.Tensor,
             prefill_len: torch.Tensor, prompt_bin_mask: torch.Tensor, output_bin_counts: torch.Tensor,
             max_prefill_len: int) -> None:
    """Rebuild the penalty rows of the new requests' slots: zero them, flag prompt tokens, count output tokens."""
    idx = expanded_idx_mapping.long()
    prompt_bin_mask[idx] = 0
    output_bin_counts[idx] = 0
    vocab = prompt_bin_mask.shape[1]
    tok = all_token_ids[idx, :max_prefill_len].long()
    pos = torch.arange(tok.shape[1], device=tok.device)
    ok = (tok >= 0) & (tok < vocab)
    is_prompt = ok & (pos < prompt_len[idx, None])
    is_output = ok & (pos >= prompt_len[idx, None]) & (pos < prefill_len[idx, None])
    flat = (idx[:, None] * vocab + tok.clamp(0, vocab - 1)).flatten()
    prompt_bin_mask.view(-1).scatter_reduce_(0, flat, is_prompt.flatten().int(), reduce="amax")
    output_bin_counts.view(-1).scatter_add_(0, flat, is_output.flatten().int())
