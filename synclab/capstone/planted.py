"""The engine after a colleague added three sampling features: logit bias, min_tokens and stop tokens.

Taught in chapter 6 (the capstone), Exercise 6.1. The features work: every token
is right. But the step no longer runs ahead of the device. Count its syncs first
(``count_syncs``, the lab's hunt cell): the count names each line that made one.
"""

from __future__ import annotations

import torch

from synclab.engine.engine_core import EngineOutput, EngineRequest, EngineRunner


class PlantedRunner(EngineRunner):
    """:class:`EngineRunner` with logit bias, min_tokens and stop tokens."""

    def _apply_sampling_extras(self, logits: torch.Tensor, reqs: list[EngineRequest]) -> None:
        rows, cols, values = [], [], []
        for row, request in enumerate(reqs):
            for token, bias in request.sampling.logit_bias:
                rows.append(row)
                cols.append(token)
                values.append(bias)
        if rows:
            device = logits.device
            logits[torch.tensor(rows, device=device), torch.tensor(cols, device=device)] += torch.tensor(
                values, device=device)
        banned = torch.zeros(logits.shape, dtype=torch.bool)  # [S, vocab] host
        for row, request in enumerate(reqs):
            params = request.sampling
            generated = len(self.states[request.request_id].output_token_ids) - len(request.prior_output_token_ids)
            if params.stop_token_ids and generated < params.min_tokens:
                banned[row, list(params.stop_token_ids)] = True
        banned = self.upload(banned, torch.bool)
        banned_rows, banned_cols = banned.nonzero(as_tuple=True)
        logits[banned_rows, banned_cols] = float("-inf")

    def _stopped_on_device(self, sampled: torch.Tensor, reqs: list[EngineRequest]) -> set[str]:
        stopped = set()
        for row, request in enumerate(reqs):
            if request.sampling.stop_token_ids and int(sampled[row]) in request.sampling.stop_token_ids:
                stopped.add(request.request_id)
        return stopped

    def stopped_on_host(self, output: EngineOutput, requests: dict[str, EngineRequest]) -> set[str]:
        return set()
