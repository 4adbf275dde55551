# One read per step: the whole logits, brought to the host, where argmax and the NaN test run.
# fails: one-sync
def decode_step(batch: primer.DecodeBatch) -> primer.StepOutput:
    logits = batch.logits.cpu()
    if torch.isnan(logits).any():
        raise ValueError("NaN in logits")
    sampled = logits.argmax(dim=-1).tolist()
    lens = batch.seq_lens_cpu.tolist()
    finished = [t == batch.eos_token_id or n + 1 >= batch.max_model_len for t, n in zip(sampled, lens)]
    for out, token in zip(batch.output_token_ids, sampled):
        out.append(token)
    batch.seq_lens_gpu += 1
    batch.seq_lens_cpu += 1
    return primer.StepOutput(sampled, finished)
