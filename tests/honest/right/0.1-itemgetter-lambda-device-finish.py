# operator.itemgetter and top-level lambda aliases; the finish rule decided on the device, read back as flags.
import operator

tokens_of = operator.itemgetter(0)
done_of = operator.itemgetter(1)
as_int64 = lambda t: t.to(torch.int64)


def decode_step(batch: primer.DecodeBatch) -> primer.StepOutput:
    logits = batch.logits
    tokens = logits.argmax(-1)
    done = (tokens == batch.eos_token_id) | (batch.seq_lens_gpu + 1 >= batch.max_model_len)
    nan_any = torch.isnan(logits).any()
    # rows: tokens, finished flags, and the NaN flag repeated (a NaN anywhere marks every column)
    nan_row = as_int64(nan_any).expand(tokens.shape[0]).reshape(1, -1)
    packed = torch.cat([as_int64(tokens).reshape(1, -1), as_int64(done).reshape(1, -1), nan_row])
    host = packed.tolist()  # one sync: 3 values per request
    if tokens.shape[0] == 0:
        return primer.StepOutput([], [])  # nothing to read and nothing to change (no logits: no NaN)
    if host[2][0]:
        raise ValueError("NaN in logits")
    sampled = list(tokens_of(host))
    finished = [bool(flag) for flag in done_of(host)]
    for out, token in zip(batch.output_token_ids, sampled):
        out.append(token)
    batch.seq_lens_gpu += 1
    batch.seq_lens_cpu += 1
    return primer.StepOutput(sampled, finished)
