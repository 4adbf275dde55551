# os with a debug switch read from os.environ, a frozen dataclass for the host's copy, a per-row NaN flag, print().
import os
from dataclasses import dataclass

DEBUG = os.environ.get("SYNCLAB_DEBUG", "") not in ("", "0")


@dataclass(frozen=True)
class HostRow:
    token: int
    has_nan: bool


def decode_step(batch: primer.DecodeBatch) -> primer.StepOutput:
    # one [num_reqs, 2] int64 tensor: each row's argmax and whether that row holds a NaN (16 bytes per request)
    per_row = torch.stack(
        [batch.logits.argmax(dim=1), torch.isnan(batch.logits).any(dim=1).to(torch.int64)], dim=1
    )
    rows = [HostRow(token, bool(flag)) for token, flag in per_row.tolist()]  # the step's only sync
    if any(row.has_nan for row in rows):
        raise ValueError("NaN in logits")
    sampled, finished = [], []
    for i, row in enumerate(rows):
        seq_len = int(batch.seq_lens_cpu[i])  # host tensor: no sync
        sampled.append(row.token)
        finished.append(row.token == batch.eos_token_id or seq_len + 1 >= batch.max_model_len)
        batch.output_token_ids[i].append(row.token)
    batch.seq_lens_gpu.add_(1)
    batch.seq_lens_cpu.add_(1)
    if DEBUG:
        print(f"decode_step: {len(rows)} requests, finished {finished}")
    return primer.StepOutput(sampled, finished)
