# pads only up to the CUDA-graph size, leaving stale entries further on in the persistent buffer
# fails: fixed-cases
class PinnedInputsRunner(GPUModelRunner):
    def _init_model_kwargs(self) -> dict[str, Any]:
        """``{"token_type_ids": [total_tokens] int32 device}``, or ``{}`` when no request carries token types."""
        bounds = self._token_type_id_requests() if self.is_pooling_model else {}
        if not bounds:
            return {}
        lens = self.optimistic_seq_lens_cpu[:self.input_batch.num_reqs].tolist()
        host = torch.tensor([int(j >= bounds.get(i, n)) for i, n in enumerate(lens) for j in range(n)],
                            dtype=torch.int32, pin_memory=self.pin_memory)
        return {"token_type_ids": host.to(self.device, non_blocking=True)}

    def _prepare_kv_sharing_fast_prefill(self, logits_indices: torch.Tensor) -> torch.Tensor:
        """The logits indices in the persistent buffer, padded with the last one to the CUDA-graph size."""
        n = logits_indices.shape[0]
        assert n > 0
        padded = self.pad_for_cudagraph(n)
        buf = self.kv_sharing_fast_prefill_logits_indices
        buf[:n].copy_(logits_indices)
        buf[n:padded] = logits_indices[-1]
        return buf[:padded]
