# Caches the uploaded bias tensors on the class, keyed by the batch's request ids, so that a batch seen before uploads
# nothing: the next run that reuses those ids with another bias applies the old one. Every stop is judged right.
# fails: planted-outputs
def clean_runner() -> type[PlantedRunner]:
    """``PlantedRunner`` with every stray sync removed and every feature kept."""

    class CleanRunner(PlantedRunner):
        _bias_cache: dict = {}  # batch's request ids -> (rows, cols, values) on the device

        def _apply_sampling_extras(self, logits, reqs):
            key = tuple(r.request_id for r in reqs)
            if key not in CleanRunner._bias_cache:
                rows, cols, vals = [], [], []
                for row, req in enumerate(reqs):
                    for token, bias in req.sampling.logit_bias:
                        rows.append(row)
                        cols.append(token)
                        vals.append(bias)
                CleanRunner._bias_cache[key] = (self.upload(rows, torch.int64), self.upload(cols, torch.int64),
                                                self.upload(vals, torch.float32)) if rows else None
            cached = CleanRunner._bias_cache[key]
            if cached is not None:
                logits[cached[0], cached[1]] += cached[2]
            banned = torch.zeros(logits.shape, dtype=torch.bool)
            for row, req in enumerate(reqs):
                p = req.sampling
                generated = len(self.states[req.request_id].output_token_ids) - len(req.prior_output_token_ids)
                if p.stop_token_ids and generated < p.min_tokens:
                    banned[row, list(p.stop_token_ids)] = True
            logits.masked_fill_(self.upload(banned, torch.bool), float("-inf"))

        def _stopped_on_device(self, sampled, reqs):
            return set()

        def stopped_on_host(self, output, requests):
            return {req_id for req_id, token in zip(output.req_ids, output.sampled_token_ids)
                    if token in requests[req_id].sampling.stop_token_ids}

    return CleanRunner
