# numpy: np.repeat/np.cumsum over the host lengths, one pinned copy; 3.4 fills the tail from a one-element device slice
class PinnedInputsRunner(GPUModelRunner):
    def _init_model_kwargs(self) -> dict[str, Any]:
        """``{"token_type_ids": [total_tokens] int32 device}``, or ``{}`` when no request carries token types."""
        if not self.is_pooling_model:
            return {}
        boundaries = self._token_type_id_requests()
        if not boundaries:
            return {}
        lens = self.optimistic_seq_lens_cpu[:self.input_batch.num_reqs].numpy().astype(np.int64)  # host mirror
        first_one = lens.copy()  # no boundary: the first 1 would come after the request's end
        for i, b in boundaries.items():
            first_one[i] = b
        starts = np.cumsum(lens) - lens
        position = np.arange(lens.sum()) - np.repeat(starts, lens)  # position inside its own request
        types = (position >= np.repeat(first_one, lens)).astype(np.int32)
        host = torch.from_numpy(types)
        if self.pin_memory:
            host = host.pin_memory()
        return {"token_type_ids": host.to(self.device, non_blocking=True)}

    def _prepare_kv_sharing_fast_prefill(self, logits_indices: torch.Tensor) -> torch.Tensor:
        """The logits indices in the persistent buffer, padded with the last one to the CUDA-graph size."""
        n = logits_indices.numel()
        if n == 0:
            raise ValueError("_prepare_kv_sharing_fast_prefill: no logits indices")
        buf = self.kv_sharing_fast_prefill_logits_indices
        buf[:n].copy_(logits_indices)
        tail = buf[n:]
        tail.copy_(logits_indices[n - 1:].expand_as(tail))  # one element broadcast on the device
        return buf[:self.pad_for_cudagraph(n)]
