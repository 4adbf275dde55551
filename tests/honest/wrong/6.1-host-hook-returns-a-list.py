# The host stop hook builds its answer with a list comprehension: a list of request ids, not a set. The engine takes
# the union of the two hooks' answers with |, which a list does not support.
# fails: planted-outputs
def clean_runner() -> type[PlantedRunner]:
    """``PlantedRunner`` with every stray sync removed and every feature kept."""

    class CleanRunner(PlantedRunner):
        def _apply_sampling_extras(self, logits, reqs):
            rows, cols, vals = [], [], []
            for row, req in enumerate(reqs):
                for token, bias in req.sampling.logit_bias:
                    rows.append(row)
                    cols.append(token)
                    vals.append(bias)
            if rows:
                logits[self.upload(rows, torch.int64), self.upload(cols, torch.int64)] += self.upload(
                    vals, torch.float32)
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
            return [req_id for req_id, token in zip(output.req_ids, output.sampled_token_ids)
                    if token in requests[req_id].sampling.stop_token_ids]

    return CleanRunner
