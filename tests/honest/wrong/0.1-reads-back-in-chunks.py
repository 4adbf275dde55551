# Reads the step's answers back a hundred requests at a time: one read per hundred requests, so three syncs in a step
# of 257 requests, and one in every step of up to a hundred.
# fails: one-sync
def decode_step(batch: primer.DecodeBatch) -> primer.StepOutput:
    tokens = batch.logits.argmax(dim=-1)  # [num_reqs]
    nan = torch.isnan(batch.logits).any(dim=-1).long()  # [num_reqs]
    both = torch.stack([tokens, nan], dim=1)  # [num_reqs, 2]
    rows: list[list[int]] = []
    for start in range(0, both.shape[0], 100):
        rows += both[start:start + 100].tolist()
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
