# Appends the tokens first and raises on NaN afterwards: the state has changed before the step is refused.
# fails: nan-raises
def decode_step(batch: primer.DecodeBatch) -> primer.StepOutput:
    tokens = batch.logits.argmax(dim=-1)
    flag = torch.isnan(batch.logits).any().reshape(1).long()
    *sampled, nan = torch.cat([tokens, flag]).tolist()
    for out, token in zip(batch.output_token_ids, sampled):
        out.append(token)
    if nan:
        raise ValueError("NaN in logits")
    lens = batch.seq_lens_cpu.tolist()
    finished = [t == batch.eos_token_id or n + 1 >= batch.max_model_len for t, n in zip(sampled, lens)]
    batch.seq_lens_gpu += 1
    batch.seq_lens_cpu += 1
    return primer.StepOutput(sampled, finished)
