# new rows built whole in a fresh [n, vocab] device table (2-D scatter along dim 1), then index_copy_ into place
def bincount(expanded_idx_mapping: torch.Tensor, all_token_ids: torch.Tensor, prompt_len: torch.Tensor,
             prefill_len: torch.Tensor, prompt_bin_mask: torch.Tensor, output_bin_counts: torch.Tensor,
             max_prefill_len: int) -> None:
    """Rebuild the penalty rows of the new requests' slots: zero them, flag prompt tokens, count output tokens."""
    slots = expanded_idx_mapping.to(torch.int64)
    vocab = prompt_bin_mask.size(1)
    toks = all_token_ids.index_select(0, slots)[:, :max_prefill_len].to(torch.int64)  # [n, L]
    pos = torch.arange(toks.size(1), device=toks.device).unsqueeze(0)  # [1, L]
    start = prompt_len.index_select(0, slots).unsqueeze(1)  # [n, 1]
    end = prefill_len.index_select(0, slots).unsqueeze(1)
    known = toks.ge(0) & toks.lt(vocab)  # ids without a column are left out (vLLM #49081)
    safe = toks.clamp(min=0, max=vocab - 1)  # a left-out position still needs a column of its own row
    flags = torch.zeros(toks.size(0), vocab, dtype=prompt_bin_mask.dtype, device=toks.device)
    flags.scatter_reduce_(1, safe, (known & (pos < start)).to(flags.dtype), reduce="amax")
    counts = torch.zeros(toks.size(0), vocab, dtype=output_bin_counts.dtype, device=toks.device)
    counts.scatter_add_(1, safe, (known & (pos >= start) & (pos < end)).to(counts.dtype))
    prompt_bin_mask.index_copy_(0, slots, flags)  # the whole row replaced: the old occupant's values go too
    output_bin_counts.index_copy_(0, slots, counts)
