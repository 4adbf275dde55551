# The stop check moved to the host hook, and the device hook's override deleted with the old code: the colleague's
# _stopped_on_device, which reads each request's sampled token back, is inherited and still runs.
# fails: planted-outputs
def clean_runner() -> type[PlantedRunner]:
    """``PlantedRunner`` with every stray sync removed and every feature kept."""

    class CleanRunner(PlantedRunner):
        def _apply_sampling_extras(self, logits: torch.Tensor, reqs: list[EngineRequest]) -> None:
            """Logit bias, then min_tokens, on this step's logits [S, vocab] (device), before sampling."""
            # logit bias: the colleague's host lists, kept as they were
            rows, cols, values = [], [], []
            for row, request in enumerate(reqs):
                for token, bias in request.sampling.logit_bias:
                    rows.append(row)
                    cols.append(token)
                    values.append(bias)
            # min_tokens: the colleague's host mask, kept: a request's stop tokens are banned while it has generated
            # fewer than min_tokens tokens in this run (placeholders count)
            banned = torch.zeros(logits.shape, dtype=torch.bool)  # [S, vocab] host
            for row, request in enumerate(reqs):
                params = request.sampling
                generated = len(self.states[request.request_id].output_token_ids) - len(request.prior_output_token_ids)
                if params.stop_token_ids and generated < params.min_tokens:
                    banned[row, list(params.stop_token_ids)] = True
            # yours: apply both to the device logits (the bias added, the banned set to -inf), with no wait
            if rows:  # three host lists: up without a wait (was torch.tensor(list, device=...): 3 blocking copies)
                logits[self.upload(rows, torch.int64), self.upload(cols, torch.int64)] += self.upload(
                    values, torch.float32)
            banned_rows, banned_cols = banned.nonzero(as_tuple=True)  # a host mask: its size is known here, no wait
            if len(banned_rows):  # the value goes up too: a Python float would be a 0-d host tensor, copied with a wait
                logits[self.upload(banned_rows, torch.int64), self.upload(banned_cols, torch.int64)] = self.upload(
                    torch.full((len(banned_rows),), float("-inf")), torch.float32)

        def stopped_on_host(self, output: EngineOutput, requests: dict[str, EngineRequest]) -> set[str]:
            """Stop tokens, judged when the step's output reaches the host (``output`` is its host copy; a request that
            finished may be gone from ``self.states`` by then: read ``output`` and ``requests``)."""
            return {req_id for req_id, token in zip(output.req_ids, output.sampled_token_ids)
                    if token in requests[req_id].sampling.stop_token_ids}  # the host copy: already here

    return CleanRunner
