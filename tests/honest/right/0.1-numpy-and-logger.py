# numpy on the host after one packed read, a module-level logger, and a constant computed by an expression.
import logging

import numpy as np

log = logging.getLogger(__name__)
NAN_FLAG_SLOT = -1  # the last slot of the packed read holds the NaN test


def decode_step(batch: primer.DecodeBatch) -> primer.StepOutput:
    logits = batch.logits
    tokens_dev = logits.argmax(dim=-1)
    nan_dev = torch.isnan(logits).any().reshape(1).long()
    packed = np.asarray(torch.cat((tokens_dev, nan_dev)).tolist(), dtype=np.int64)  # the one sync
    if packed[NAN_FLAG_SLOT]:
        raise ValueError("NaN in logits")
    tokens = packed[:NAN_FLAG_SLOT]
    lens = batch.seq_lens_cpu.numpy()
    done = (tokens == batch.eos_token_id) | (lens + 1 >= batch.max_model_len)
    sampled = [int(t) for t in tokens]
    finished = [bool(d) for d in done]
    for out, tok in zip(batch.output_token_ids, sampled):
        out.append(tok)
    batch.seq_lens_gpu += 1
    batch.seq_lens_cpu += 1
    log.debug("decode step: %d requests, %d finished", len(sampled), sum(finished))
    return primer.StepOutput(sampled, finished)
