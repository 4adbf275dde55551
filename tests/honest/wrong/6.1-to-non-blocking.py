# Uploads with torch.tensor(...).to(device, non_blocking=True) instead of self.upload: staging copies from pageable
# memory, which chapter 3 counts and 6.1's contract refuses as chapter 3 does.
# fails: planted-outputs
def clean_runner() -> type[PlantedRunner]:
    """``PlantedRunner`` with every stray sync removed and every feature kept."""

    class CleanRunner(PlantedRunner):
        def _apply_sampling_extras(self, logits, reqs):
            dev = logits.device
            rows, cols, vals = [], [], []
            for row, req in enumerate(reqs):
                for token, bias in req.sampling.logit_bias:
                    rows.append(row)
                    cols.append(token)
                    vals.append(bias)
            if rows:
                r = torch.tensor(rows).to(dev, non_blocking=True)
                c = torch.tensor(cols).to(dev, non_blocking=True)
                logits[r, c] += torch.tensor(vals).to(dev, non_blocking=True)
            banned = torch.zeros(logits.shape, dtype=torch.bool)
            for row, req in enumerate(reqs):
                p = req.sampling
                generated = len(self.states[req.request_id].output_token_ids) - len(req.prior_output_token_ids)
                if p.stop_token_ids and generated < p.min_tokens:
                    banned[row, list(p.stop_token_ids)] = True
            logits.masked_fill_(banned.to(dev, non_blocking=True), float("-inf"))

        def _stopped_on_device(self, sampled, reqs):
            return set()

        def stopped_on_host(self, output, requests):
            return {rid for rid, tok in zip(output.req_ids, output.sampled_token_ids)
                    if tok in requests[rid].sampling.stop_token_ids}

    return CleanRunner
