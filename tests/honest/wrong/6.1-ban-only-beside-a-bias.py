# Applies min_tokens' ban only inside the logit bias's `if rows:`: right in every step where some request has a
# bias (the fixed mix has one throughout), wrong in a step where none has (a learner's answer passed most seeds).
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
                # the ban, indented one level too far: applied only in a step where some request has a bias
                banned_rows, banned_cols = banned.nonzero(as_tuple=True)
                if len(banned_rows):
                    logits[self.upload(banned_rows, torch.int64), self.upload(banned_cols, torch.int64)] = self.upload(
                        torch.full((len(banned_rows),), float("-inf")), torch.float32)

        def _stopped_on_device(self, sampled: torch.Tensor, reqs: list[EngineRequest]) -> set[str]:
            """Stop tokens, judged during the step from ``sampled`` [S] (device): the ids of the requests it ends.

            A stop named here takes effect where one named by ``stopped_on_host`` does: when the step's output
            reaches the host."""
            return set()  # int(sampled[row]) read the device once per request

        def stopped_on_host(self, output: EngineOutput, requests: dict[str, EngineRequest]) -> set[str]:
            """Stop tokens, judged when the step's output reaches the host (``output`` is its host copy)."""
            return {req_id for req_id, token in zip(output.req_ids, output.sampled_token_ids)
                    if token in requests[req_id].sampling.stop_token_ids}  # the host copy: already here

    return CleanRunner