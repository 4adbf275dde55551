# Judges every stop in the device hook, from a non_blocking download read at once, and none in the host hook: the
# copy has not landed when it is read (the simulated buffer holds -12345), so no stop is ever seen and the outputs
# run long. The failure leads with the early read, its cause, not with the outputs alone.
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
                logits[self.upload(rows, torch.int64), self.upload(cols, torch.int64)] += self.upload(vals, torch.float32)
            ban_rows, ban_cols = [], []
            for row, req in enumerate(reqs):
                p = req.sampling
                generated = len(self.states[req.request_id].output_token_ids) - len(req.prior_output_token_ids)
                if p.stop_token_ids and generated < p.min_tokens:
                    ban_rows += [row] * len(p.stop_token_ids)
                    ban_cols += list(p.stop_token_ids)
            if ban_rows:
                logits[self.upload(ban_rows, torch.int64), self.upload(ban_cols, torch.int64)] = self.upload(
                    [float("-inf")] * len(ban_rows), torch.float32)

        def _stopped_on_device(self, sampled, reqs):
            tokens = sampled.to("cpu", non_blocking=True)  # no wait: the copy returns at once
            return {req.request_id for req, token in zip(reqs, tokens.tolist())
                    if req.sampling.stop_token_ids and token in req.sampling.stop_token_ids}

        def stopped_on_host(self, output, requests):
            return set()  # judged on the device already

    return CleanRunner
