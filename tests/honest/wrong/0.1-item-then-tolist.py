# Reads the NaN test with .item() and the tokens with .tolist(): two reads, so two syncs per step.
# fails: one-sync
def decode_step(batch: primer.DecodeBatch) -> primer.StepOutput:
    if torch.isnan(batch.logits).any().item():
        raise ValueError("NaN in logits")
    sampled = batch.logits.argmax(dim=-1).tolist()
    lens = batch.seq_lens_cpu.tolist()
    finished = [t == batch.eos_token_id or n + 1 >= batch.max_model_len for t, n in zip(sampled, lens)]
    for out, token in zip(batch.output_token_ids, sampled):
        out.append(token)
    batch.seq_lens_gpu += 1
    batch.seq_lens_cpu += 1
    return primer.StepOutput(sampled, finished)
