# a spare "dump" column for the positions that must not count; index_put_(accumulate=True) with device values
def bincount(expanded_idx_mapping: torch.Tensor, all_token_ids: torch.Tensor, prompt_len: torch.Tensor,
             prefill_len: torch.Tensor, prompt_bin_mask: torch.Tensor, output_bin_counts: torch.Tensor,
             max_prefill_len: int) -> None:
    """Rebuild the penalty rows of the new requests' slots: zero them, flag prompt tokens, count output tokens."""
    idx = expanded_idx_mapping.long()
    n, vocab, dev = idx.numel(), output_bin_counts.shape[1], output_bin_counts.device
    prompt_bin_mask.index_fill_(0, idx, 0)
    output_bin_counts.index_fill_(0, idx, 0)
    tokens = all_token_ids[idx, :max_prefill_len].long()  # [n, L]
    j = torch.arange(tokens.shape[1], device=dev)
    p, q = prompt_len[idx][:, None], prefill_len[idx][:, None]
    in_vocab = (tokens >= 0) & (tokens < vocab)
    dump = torch.full_like(tokens, vocab)  # column `vocab` of the scratch tables: thrown away below
    prompt_col = torch.where(in_vocab & (j < p), tokens, dump)
    output_col = torch.where(in_vocab & (j >= p) & (j < q), tokens, dump)
    row = torch.arange(n, device=dev)[:, None].expand_as(tokens)
    ones = torch.ones_like(tokens, dtype=torch.int32)
    seen = torch.zeros(n, vocab + 1, dtype=torch.int32, device=dev).index_put_((row, prompt_col), ones, accumulate=True)
    made = torch.zeros(n, vocab + 1, dtype=torch.int32, device=dev).index_put_((row, output_col), ones, accumulate=True)
    prompt_bin_mask.index_add_(0, idx, seen[:, :vocab].clamp(max=1))  # onto zeroed rows: the flag itself
    output_bin_counts.index_add_(0, idx, made[:, :vocab])
