# Checks min_tokens again in stopped_on_host, with > where the ban's own rule is >=: a stop token sampled with exactly
# min_tokens tokens out is refused, and the request runs on (the ban in the logits is right).
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
                    [float("-inf")] * len(rows), torch.float32)

        def _stopped_on_device(self, sampled: torch.Tensor, reqs: list[EngineRequest]) -> set[str]:
            return set()  # int(sampled[row]) read the device once per request

        def stopped_on_host(self, output: EngineOutput, requests: dict[str, EngineRequest]) -> set[str]:
            seen = self.__dict__.setdefault("tokens_seen", {})  # this run's tokens per request, counted on the host
            stopped = set()
            for req_id, token in zip(output.req_ids, output.sampled_token_ids):
                params = requests[req_id].sampling
                before = seen.get(req_id, 0)  # tokens out before this one
                seen[req_id] = before + 1
                if token in params.stop_token_ids and before > params.min_tokens:  # a stop only past min_tokens
                    stopped.add(req_id)
            return stopped

    return CleanRunner
