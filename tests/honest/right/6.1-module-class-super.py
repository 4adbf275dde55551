# The runner written at module level and returned by clean_runner(); super() keeps the base's stop check, a
# collections.defaultdict groups the bans, and a mask assignment (x[mask] = -inf) that torch runs as masked_fill_.
from collections import defaultdict


class CleanRunner(PlantedRunner):
    """PlantedRunner's three features with the data on the side that uses it."""

    def _bias(self, logits, reqs):
        triples = [(row, token, bias) for row, req in enumerate(reqs) for token, bias in req.sampling.logit_bias]
        if not triples:
            return
        rows, cols, values = map(list, zip(*triples))
        logits[self.upload(rows, torch.int64), self.upload(cols, torch.int64)] += self.upload(values, torch.float32)

    def _ban_stop_tokens(self, logits, reqs):
        bans = defaultdict(list)
        for row, req in enumerate(reqs):
            wanted = req.sampling.min_tokens
            have = len(self.states[req.request_id].output_token_ids) - len(req.prior_output_token_ids)
            if req.sampling.stop_token_ids and have < wanted:
                bans[row].extend(req.sampling.stop_token_ids)
        if not bans:
            return
        mask = torch.zeros(logits.shape, dtype=torch.bool)
        for row, tokens in bans.items():
            mask[row, tokens] = True
        logits[self.upload(mask, torch.bool)] = float("-inf")

    def _apply_sampling_extras(self, logits, reqs):
        self._bias(logits, reqs)
        self._ban_stop_tokens(logits, reqs)

    def _stopped_on_device(self, sampled, reqs):
        return set()

    def stopped_on_host(self, output, requests):
        found = set(super().stopped_on_host(output, requests))
        for req_id, token in zip(output.req_ids, output.sampled_token_ids):
            sampling = requests[req_id].sampling
            if sampling is not None and token in sampling.stop_token_ids:
                found.add(req_id)
        return found


def clean_runner() -> type[PlantedRunner]:
    """``PlantedRunner`` with every stray sync removed and every feature kept."""
    return CleanRunner
