# 3.4 fails loudly with a RuntimeError of its own (a custom exception class) when no logits indices come in
class NoLogitsIndices(RuntimeError):
    """The scheduler sent a step with no logits indices: a bug upstream."""


class PinnedInputsRunner(GPUModelRunner):
    def _init_model_kwargs(self) -> dict[str, Any]:
        """``{"token_type_ids": [total_tokens] int32 device}``, or ``{}`` when no request carries token types."""
        bounds = self._token_type_id_requests() if self.is_pooling_model else {}
        if not bounds:
            return {}
        lens = self.optimistic_seq_lens_cpu[:self.input_batch.num_reqs].tolist()
        parts = [torch.arange(n, dtype=torch.int32) >= bounds.get(i, n) for i, n in enumerate(lens)]
        host = torch.empty(sum(lens), dtype=torch.int32, pin_memory=self.pin_memory)
        torch.cat([p.int() for p in parts], out=host)
        return {"token_type_ids": host.to(self.device, non_blocking=True)}

    def _prepare_kv_sharing_fast_prefill(self, logits_indices: torch.Tensor) -> torch.Tensor:
        """The logits indices in the persistent buffer, padded with the last one to the CUDA-graph size."""
        n = logits_indices.shape[0]
        if n == 0:
            raise NoLogitsIndices("_prepare_kv_sharing_fast_prefill got no logits indices")
        buf = self.kv_sharing_fast_prefill_logits_indices
        buf[:n] = logits_indices
        buf[n:] = logits_indices[-1]
        return buf[:self.pad_for_cudagraph(n)]
