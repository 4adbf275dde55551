# Judges the stops on the host copy, but when a stop token arrives walks the request's whole output history to make
# sure min_tokens allowed it (the ban already did): a step in which a request stops reads its whole history.
# fails: flat-in-output-length
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

        def _stopped_on_device(self, sampled: torch.Tensor, reqs: list[EngineRequest]) -> set[str]:
            """Stop tokens, judged during the step from ``sampled`` [S] (device): the ids of the requests it ends.

            A stop named here takes effect where one named by ``stopped_on_host`` does: when the step's output
            reaches the host. Building a set of request ids from ``sampled``'s values reads them on the host: a
            sync."""
            return set()  # int(sampled[row]) read the device once per request

        def stopped_on_host(self, output: EngineOutput, requests: dict[str, EngineRequest]) -> set[str]:
            """Stop tokens, judged when the step's output reaches the host (``output`` is its host copy; a request that
            finished may be gone from ``self.states`` by then: read ``output`` and ``requests``). A stop token sampled
            is one min_tokens allows: its ban kept it off the logits until then."""
            stops = set()
            for req_id, token in zip(output.req_ids, output.sampled_token_ids):
                request = requests[req_id]
                if token in request.sampling.stop_token_ids:  # a stop: make sure min_tokens allowed it
                    state = self.states.get(req_id)
                    out = [t for t in state.output_token_ids] if state is not None else []  # the whole output
                    if len(out) - len(request.prior_output_token_ids) >= request.sampling.min_tokens:
                        stops.add(req_id)
            return stops

    return CleanRunner