# a helper class with __iter__/__len__/__repr__, a generator, a nested helper, asserts, sys and statistics.
import statistics
import sys


class Readback:
    """The host's view of one step: the sampled ids, after the single read from the device."""

    def __init__(self, values: list[int]) -> None:
        *self.tokens, self.nan_flag = values

    def __len__(self) -> int:
        return len(self.tokens)

    def __iter__(self):
        return iter(self.tokens)

    def __repr__(self) -> str:
        return f"Readback({len(self)} tokens, nan={bool(self.nan_flag)})"


def decode_step(batch: primer.DecodeBatch) -> primer.StepOutput:
    def read_once() -> Readback:
        argmax = torch.argmax(batch.logits, dim=-1)
        nan = torch.isnan(batch.logits).any().unsqueeze(0).to(argmax.dtype)
        return Readback(torch.cat((argmax, nan)).tolist())

    def finish_flags(tokens, lengths):
        for token, length in zip(tokens, lengths):
            yield token == batch.eos_token_id or length + 1 >= batch.max_model_len

    back = read_once()
    if back.nan_flag:
        raise ValueError("NaN in logits")
    assert len(back) == batch.num_reqs, back
    sampled = list(back)
    finished = list(finish_flags(sampled, batch.seq_lens_cpu.tolist()))
    for request_tokens, token in zip(batch.output_token_ids, sampled):
        request_tokens.append(token)
    batch.seq_lens_gpu += 1
    batch.seq_lens_cpu += 1
    if sampled and "-v" in sys.argv:
        print(f"{back!r}: mean token id {statistics.fmean(sampled):.1f}", file=sys.stderr)
    return primer.StepOutput(sampled, finished)
