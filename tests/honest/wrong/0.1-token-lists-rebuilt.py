# Each request's list is replaced by a new one holding the token, not appended to in place: whoever holds the
# request's list (the scheduler, in vLLM) never sees the token.
# fails: fixed-cases
def decode_step(batch: primer.DecodeBatch) -> primer.StepOutput:
    tokens = batch.logits.argmax(dim=-1)
    flag = torch.isnan(batch.logits).any().reshape(1).long()
    *sampled, nan = torch.cat([tokens, flag]).tolist()
    if nan:
        raise ValueError("NaN in logits")
    lens = batch.seq_lens_cpu.tolist()
    finished = [t == batch.eos_token_id or n + 1 >= batch.max_model_len for t, n in zip(sampled, lens)]
    batch.output_token_ids = [out + [token] for out, token in zip(batch.output_token_ids, sampled)]
    batch.seq_lens_gpu += 1
    batch.seq_lens_cpu += 1
    return primer.StepOutput(sampled, finished)
