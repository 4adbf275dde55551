# Flat indices (row * vocab + token) into logits.view(-1): the bias written through them, the ban with index_fill_.
def clean_runner() -> type[PlantedRunner]:
    """``PlantedRunner`` with every stray sync removed and every feature kept."""

    class CleanRunner(PlantedRunner):
        def _apply_sampling_extras(self, logits: torch.Tensor, reqs: list[EngineRequest]) -> None:
            vocab = logits.shape[-1]
            flat = logits.view(-1)
            biased = [(row * vocab + token, value) for row, r in enumerate(reqs) for token, value in r.sampling.logit_bias]
            if biased:
                where = self.upload([i for i, _ in biased], torch.int64)
                flat[where] = flat[where] + self.upload([v for _, v in biased], torch.float32)
            banned = []
            for row, r in enumerate(reqs):
                s = r.sampling
                if not s.stop_token_ids:
                    continue
                so_far = len(self.states[r.request_id].output_token_ids) - len(r.prior_output_token_ids)
                if so_far < s.min_tokens:
                    banned.extend(row * vocab + token for token in s.stop_token_ids)
            if banned:
                flat.index_fill_(0, self.upload(banned, torch.int64), float("-inf"))

        def _stopped_on_device(self, sampled: torch.Tensor, reqs: list[EngineRequest]) -> set[str]:
            return set()

        def stopped_on_host(self, output: EngineOutput, requests: dict[str, EngineRequest]) -> set[str]:
            return {rid for rid, tok in zip(output.req_ids, output.sampled_token_ids)
                    if requests[rid].sampling and tok in requests[rid].sampling.stop_token_ids}

    return CleanRunner
