# Tests each request's row for NaN inside the loop that appends: by the time a later row raises, the earlier
# requests have their token appended.
# fails: nan-raises
def decode_step(batch: primer.DecodeBatch) -> primer.StepOutput:
    tokens = batch.logits.argmax(dim=-1)
    flags = torch.isnan(batch.logits).any(dim=-1).long()
    values = torch.stack([tokens, flags], dim=1).tolist()  # [[token, nan], ...]: one read
    lens = batch.seq_lens_cpu.tolist()
    sampled, finished = [], []
    for out, (token, nan), n in zip(batch.output_token_ids, values, lens):
        if nan:
            raise ValueError("NaN in logits")
        out.append(token)
        sampled.append(token)
        finished.append(token == batch.eos_token_id or n + 1 >= batch.max_model_len)
    batch.seq_lens_gpu += 1
    batch.seq_lens_cpu += 1
    return primer.StepOutput(sampled, finished)
