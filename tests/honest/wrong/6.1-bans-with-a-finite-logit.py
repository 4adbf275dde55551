# Bans min_tokens' stop tokens with a large negative logit (-1e4) instead of -inf: the tokens come out the same,
# but a banned token's logprob is finite where it must be -inf.
# fails: planted-outputs
def clean_runner() -> type[PlantedRunner]:
    """``PlantedRunner`` with every stray sync removed and every feature kept."""
    class CleanRunner(PlantedRunner):
        def _apply_sampling_extras(self, logits: torch.Tensor, reqs: list[EngineRequest]) -> None:
            rows, cols, values = [], [], []
            for row, request in enumerate(reqs):
                for token, bias in request.sampling.logit_bias:
                    rows.append(row)
                    cols.append(token)
                    values.append(bias)
            if rows:  # three host lists: up without a wait (was torch.tensor(list, device=...): 3 blocking copies)
                logits[self.upload(rows, torch.int64), self.upload(cols, torch.int64)] += self.upload(
                    values, torch.float32)
            rows, cols = [], []
            for row, request in enumerate(reqs):
                params = request.sampling
                # The host knows how many tokens are out (placeholders count): no device mask, no nonzero.
                generated = len(self.states[request.request_id].output_token_ids) - len(request.prior_output_token_ids)
                if params.stop_token_ids and generated < params.min_tokens:
                    rows += [row] * len(params.stop_token_ids)
                    cols += params.stop_token_ids
            if rows:  # the value goes up too: a Python float here would be a 0-d host tensor, copied with a wait
                logits[self.upload(rows, torch.int64), self.upload(cols, torch.int64)] = self.upload(
                    [-1e4] * len(rows), torch.float32)  # "low enough"

        def _stopped_on_device(self, sampled: torch.Tensor, reqs: list[EngineRequest]) -> set[str]:
            return set()  # int(sampled[row]) read the device once per request

        def stopped_on_host(self, output: EngineOutput, requests: dict[str, EngineRequest]) -> set[str]:
            return {req_id for req_id, token in zip(output.req_ids, output.sampled_token_ids)
                    if token in requests[req_id].sampling.stop_token_ids}  # the host copy: already here

    return CleanRunner
