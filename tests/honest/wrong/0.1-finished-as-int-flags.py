# Decides "finished" on the host as an int64 tensor of flags and hands back its .tolist(): Python ints (0 and 1), equal
# to the right bools in an `if`, not the bools the engine's contract asks for.
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
    done = (torch.tensor(sampled, dtype=torch.long) == batch.eos_token_id) | (lens + 1 >= batch.max_model_len)
    finished = done.long().tolist()
    for out, token in zip(batch.output_token_ids, sampled):
        out.append(token)
    batch.seq_lens_gpu += 1
    batch.seq_lens_cpu += 1
    return primer.StepOutput(sampled, finished)
