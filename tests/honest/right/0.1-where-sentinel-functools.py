# NaN folded into the token ids as a sentinel with torch.where; functools.partial and math for the constants.
import functools
import math

NAN_SENTINEL = -1  # no vocabulary id is negative
TINY = 10 ** -12
argmax_rows = functools.partial(torch.argmax, dim=-1)


def decode_step(batch: primer.DecodeBatch) -> primer.StepOutput:
    logits = batch.logits
    bad = torch.isnan(logits).any()
    ids = torch.where(bad, torch.full_like(argmax_rows(logits), NAN_SENTINEL), argmax_rows(logits))
    sampled = ids.tolist()  # the one sync (an empty batch has no logits, so no NaN to miss)
    if NAN_SENTINEL in sampled:
        raise ValueError("NaN in logits")
    limit = batch.max_model_len
    lens = batch.seq_lens_cpu.tolist()
    finished = []
    for token, n in zip(sampled, lens):
        # the length test, written as a ratio as some people do: n + 1 >= limit
        finished.append(token == batch.eos_token_id or (n + 1) / limit >= 1 - TINY)
    for out, token in zip(batch.output_token_ids, sampled):
        out.append(token)
    batch.seq_lens_gpu += 1
    batch.seq_lens_cpu += 1
    assert math.isfinite(limit)
    return primer.StepOutput(sampled, finished)
