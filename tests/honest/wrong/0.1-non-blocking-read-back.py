# Reads the tokens and NaN flags back with .to('cpu', non_blocking=True), then at once reads the result: the copy has not
# landed, so the flags it reads are garbage (not 0) and the step raises over logits that hold no NaN.
# fails: one-sync
def decode_step(batch: primer.DecodeBatch) -> primer.StepOutput:
    tokens = batch.logits.argmax(dim=-1)
    nan = torch.isnan(batch.logits).any(dim=-1).long()
    both = torch.stack([tokens, nan], dim=1).to("cpu", non_blocking=True)
    rows = both.tolist()
    if any(flag for _, flag in rows):
        raise ValueError("NaN in logits")
    sampled = [token for token, _ in rows]
    lens = batch.seq_lens_cpu.tolist()
    finished = [t == batch.eos_token_id or n + 1 >= batch.max_model_len for t, n in zip(sampled, lens)]
    for out, token in zip(batch.output_token_ids, sampled):
        out.append(token)
    batch.seq_lens_gpu += 1
    batch.seq_lens_cpu += 1
    return primer.StepOutput(sampled, finished)
