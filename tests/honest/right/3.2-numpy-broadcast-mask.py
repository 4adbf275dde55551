# numpy builds the padded matrix and the mask (broadcast against the lengths); torch.where for the padding
class PinnedSampler(Sampler):
    def gather_specific_token_logprobs(self, logits: torch.Tensor, logprob_token_ids: dict[int, list[int]],
                                       sampled: torch.Tensor) -> LogprobsTensors | None:
        """Logprobs of the sampled token and of each request's requested ids."""
        if len(logprob_token_ids) == 0:
            return None
        num_rows = logits.shape[0]
        lengths = np.zeros(num_rows, dtype=np.int64)
        for row, wanted in logprob_token_ids.items():
            lengths[row] = len(wanted)
        width = int(lengths.max()) + 1  # a NumPy value on the host: nothing to wait for
        ids_np = np.zeros((num_rows, width), dtype=np.int64)
        for row, wanted in logprob_token_ids.items():
            ids_np[row, 1:1 + len(wanted)] = wanted
        keep_np = np.arange(width)[None, :] <= lengths[:, None]  # column 0 and each row's own ids

        def upload(array: np.ndarray) -> torch.Tensor:
            host = torch.from_numpy(array)
            if self.pin_memory:
                host = host.pin_memory()  # a new pinned copy, every call
            return host.to(logits.device, non_blocking=True)

        ids = upload(ids_np)
        keep = upload(keep_np)
        ids[:, 0] = sampled  # device to device
        logprobs = torch.where(keep, compute_token_logprobs(logits, ids), float("-inf"))
        ranks = (logits > logits.gather(1, sampled.view(-1, 1))).sum(dim=1)
        return LogprobsTensors(ids.int(), logprobs, ranks)
