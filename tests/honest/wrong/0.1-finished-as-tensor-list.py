# Decides "finished" on the device for the whole batch, then hands back list(tensor): 0-d tensors that compare equal
# to the right bools, not the bools the engine reads on the host.
# fails: fixed-cases
def decode_step(batch: primer.DecodeBatch) -> primer.StepOutput:
    logits = batch.logits
    tokens = logits.argmax(dim=-1)
    has_nan = torch.isnan(logits).any()
    values = torch.cat([tokens, has_nan.long().view(1)]).tolist()
    if values[-1]:
        raise ValueError("NaN in logits")
    sampled = values[:-1]
    lens = batch.seq_lens_cpu
    finished = list((torch.tensor(sampled, dtype=torch.long) == batch.eos_token_id) | (lens + 1 >= batch.max_model_len))
    for out, token in zip(batch.output_token_ids, sampled):
        out.append(token)
    batch.seq_lens_gpu += 1
    batch.seq_lens_cpu += 1
    return primer.StepOutput(sampled, finished)
