# Brings the NaN flag back beside each token and reads it from the first row: a batch of 0 requests has no first row.
# fails: empty-batch
def decode_step(batch: primer.DecodeBatch) -> primer.StepOutput:
    n = batch.num_reqs
    tokens = batch.logits.argmax(dim=-1)
    has_nan = torch.isnan(batch.logits).any().long().expand(n)
    rows = torch.stack([tokens, has_nan], dim=1).tolist()
    if rows[0][1]:
        raise ValueError("NaN in logits")
    sampled = [row[0] for row in rows]
    lens = batch.seq_lens_cpu.tolist()
    finished = [t == batch.eos_token_id or n + 1 >= batch.max_model_len for t, n in zip(sampled, lens)]
    for out, token in zip(batch.output_token_ids, sampled):
        out.append(token)
    batch.seq_lens_gpu += 1
    batch.seq_lens_cpu += 1
    return primer.StepOutput(sampled, finished)
