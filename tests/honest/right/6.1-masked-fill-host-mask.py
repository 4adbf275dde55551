# Bias through uploaded index tensors; min_tokens as a host mask uploaded whole and applied with masked_fill_;
# stop tokens read from the host copy, with each request's stop ids as a cached frozenset (functools.lru_cache).
from functools import lru_cache

NEG_INF = float("-inf")


@lru_cache(maxsize=None)
def stop_set(stop_token_ids: tuple) -> frozenset:
    return frozenset(stop_token_ids)


def clean_runner() -> type[PlantedRunner]:
    """``PlantedRunner`` with every stray sync removed and every feature kept."""

    class CleanRunner(PlantedRunner):
        def _apply_sampling_extras(self, logits, reqs):
            bias_rows, bias_cols, bias_vals = [], [], []
            for row, req in enumerate(reqs):
                for token, bias in req.sampling.logit_bias:
                    bias_rows.append(row)
                    bias_cols.append(token)
                    bias_vals.append(bias)
            if bias_rows:
                index = (self.upload(bias_rows, torch.int64), self.upload(bias_cols, torch.int64))
                logits[index] += self.upload(bias_vals, torch.float32)
            banned = torch.zeros(logits.shape, dtype=torch.bool)  # on the host: writing into it costs no wait
            any_banned = False
            for row, req in enumerate(reqs):
                params = req.sampling
                produced = len(self.states[req.request_id].output_token_ids) - len(req.prior_output_token_ids)
                if params.stop_token_ids and produced < params.min_tokens:
                    banned[row, list(params.stop_token_ids)] = True
                    any_banned = True
            if any_banned:
                logits.masked_fill_(self.upload(banned, torch.bool), NEG_INF)

        def _stopped_on_device(self, sampled, reqs):
            return set()  # decided on the host copy instead

        def stopped_on_host(self, output, requests):
            stopped = set()
            for req_id, token in zip(output.req_ids, output.sampled_token_ids):
                params = requests[req_id].sampling
                if params is not None and token in stop_set(params.stop_token_ids):
                    stopped.add(req_id)
            return stopped

    return CleanRunner
