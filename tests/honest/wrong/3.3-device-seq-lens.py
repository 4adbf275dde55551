# lengths read from the device tensor self.seq_lens (one .tolist(): "only one sync, not one per request")
# fails: no-syncs
class PinnedInputsRunner(GPUModelRunner):
    def _init_model_kwargs(self) -> dict[str, Any]:
        """``{"token_type_ids": [total_tokens] int32 device}``, or ``{}`` when no request carries token types."""
        if not self.is_pooling_model:
            return {}
        bounds = self._token_type_id_requests()
        if not bounds:
            return {}
        lens = self.seq_lens[:self.input_batch.num_reqs].tolist()
        host = torch.tensor([int(j >= bounds.get(i, n)) for i, n in enumerate(lens) for j in range(n)],
                            dtype=torch.int32, pin_memory=self.pin_memory)
        return {"token_type_ids": host.to(self.device, non_blocking=True)}

    def _prepare_kv_sharing_fast_prefill(self, logits_indices: torch.Tensor) -> torch.Tensor:
        """The logits indices in the persistent buffer, padded with the last one to the CUDA-graph size."""
        n = logits_indices.shape[0]
        assert n > 0
        buf = self.kv_sharing_fast_prefill_logits_indices
        buf[:n] = logits_indices
        buf[n:] = logits_indices[-1]
        return buf[:self.pad_for_cudagraph(n)]
