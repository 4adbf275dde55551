# the flags written with a plain scatter_ of every position's "is a prompt token" (1 or 0): a prompt token that comes
# again past the prompt gets a 0 written over its flag, the last write winning
# fails: prompt-flags
def bincount(expanded_idx_mapping: torch.Tensor, all_token_ids: torch.Tensor, prompt_len: torch.Tensor,
             prefill_len: torch.Tensor, prompt_bin_mask: torch.Tensor, output_bin_counts: torch.Tensor,
             max_prefill_len: int) -> None:
    """Rebuild the penalty rows of the new requests' slots: zero them, flag prompt tokens, count output tokens."""
    idx = expanded_idx_mapping.long()
    prompt_bin_mask.index_fill_(0, idx, 0)
    output_bin_counts.index_fill_(0, idx, 0)
    vocab = prompt_bin_mask.shape[1]
    tok = all_token_ids[idx, :max_prefill_len].long()  # [n, L]
    pos = torch.arange(tok.shape[1], device=tok.device)
    in_vocab = (tok >= 0) & (tok < vocab)
    is_prompt = (pos < prompt_len[idx, None]) & in_vocab
    is_output = (pos >= prompt_len[idx, None]) & (pos < prefill_len[idx, None]) & in_vocab
    flat = (idx[:, None] * vocab + tok.clamp(0, vocab - 1)).flatten()
    prompt_bin_mask.view(-1).scatter_(0, flat, is_prompt.flatten().to(prompt_bin_mask.dtype))
    output_bin_counts.view(-1).scatter_add_(0, flat, is_output.flatten().to(output_bin_counts.dtype))
