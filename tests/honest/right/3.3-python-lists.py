# plain Python lists built per request, torch.tensor(..., pin_memory=self.pin_memory); assert and fill_ with a 0-d tensor
class PinnedInputsRunner(GPUModelRunner):
    def _init_model_kwargs(self) -> dict[str, Any]:
        """``{"token_type_ids": [total_tokens] int32 device}``, or ``{}`` when no request carries token types."""
        types_from = self._token_type_id_requests() if self.is_pooling_model else {}
        if not types_from:
            return {}
        flat: list[int] = []
        for i, length in enumerate(self.optimistic_seq_lens_cpu[:self.input_batch.num_reqs].tolist()):
            zeros = min(types_from.get(i, length), length)
            flat.extend([0] * zeros)
            flat.extend([1] * (length - zeros))
        host = torch.tensor(flat, dtype=torch.int32, pin_memory=self.pin_memory)
        return {"token_type_ids": host.to(self.device, non_blocking=True)}

    def _prepare_kv_sharing_fast_prefill(self, logits_indices: torch.Tensor) -> torch.Tensor:
        """The logits indices in the persistent buffer, padded with the last one to the CUDA-graph size."""
        num_logits = len(logits_indices)
        assert num_logits, "nothing scheduled: no logits indices"
        out = self.kv_sharing_fast_prefill_logits_indices
        out[:num_logits] = logits_indices
        out[num_logits:].fill_(logits_indices[-1])  # fill_ takes the 0-d device tensor: no read back
        return out[:self.pad_for_cudagraph(num_logits)]
