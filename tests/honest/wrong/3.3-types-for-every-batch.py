# Passes token types whenever the model is a pooling model: all 0 when no request carries a boundary.
# fails: nothing-to-pass
class PinnedInputsRunner(GPUModelRunner):
    def _init_model_kwargs(self) -> dict[str, Any]:
        """``{"token_type_ids": [total_tokens] int32 device}``, or ``{}`` when no request carries token types."""
        model_kwargs: dict[str, Any] = {}
        if not self.is_pooling_model:
            return model_kwargs
        num_reqs = self.input_batch.num_reqs
        token_type_id_requests = self._token_type_id_requests()
        seq_lens = self.optimistic_seq_lens_cpu[:num_reqs].tolist()  # host tensor: no sync
        token_type_ids = [(torch.arange(n) >= token_type_id_requests.get(i, n)).int() for i, n in enumerate(seq_lens)]
        token_type_ids_cpu = torch.empty(sum(seq_lens), dtype=torch.int32, pin_memory=self.pin_memory)
        torch.cat(token_type_ids, out=token_type_ids_cpu)
        model_kwargs["token_type_ids"] = token_type_ids_cpu.to(device=self.device, non_blocking=True)
        return model_kwargs

    def _prepare_kv_sharing_fast_prefill(self, logits_indices: torch.Tensor) -> torch.Tensor:
        """The logits indices in the persistent buffer, padded with the last one to the CUDA-graph size."""
        num_logits = logits_indices.shape[0]
        assert num_logits > 0, "no logits indices: nothing was scheduled"
        buf = self.kv_sharing_fast_prefill_logits_indices
        buf[:num_logits].copy_(logits_indices)
        buf[num_logits:] = logits_indices[-1]  # a 0-d device tensor: the fill stays on the device
        return buf[:self.pad_for_cudagraph(num_logits)]
