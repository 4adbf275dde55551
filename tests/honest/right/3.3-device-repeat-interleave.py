# only the per-request numbers go up (lengths and boundaries, one pinned [2, n] table); the types are expanded on the
# device with repeat_interleave(..., output_size=total), where the host-known total spares torch the size read-back
class PinnedInputsRunner(GPUModelRunner):
    def _init_model_kwargs(self) -> dict[str, Any]:
        """``{"token_type_ids": [total_tokens] int32 device}``, or ``{}`` when no request carries token types."""
        if not self.is_pooling_model:
            return {}
        bounds = self._token_type_id_requests()
        if not bounds:
            return {}
        lens = self.optimistic_seq_lens_cpu[:self.input_batch.num_reqs].tolist()
        total = sum(lens)
        starts = [0]
        for n in lens[:-1]:
            starts.append(starts[-1] + n)
        per_req = torch.tensor([lens, [s + bounds.get(i, n) for i, (s, n) in enumerate(zip(starts, lens))]],
                               dtype=torch.int64, pin_memory=self.pin_memory)  # [2, num_reqs]: lengths, first 1
        per_req = per_req.to(self.device, non_blocking=True)
        first_one = torch.repeat_interleave(per_req[1], per_req[0], output_size=total)  # [total], no size read
        position = torch.arange(total, device=self.device)
        return {"token_type_ids": (position >= first_one).to(torch.int32)}

    def _prepare_kv_sharing_fast_prefill(self, logits_indices: torch.Tensor) -> torch.Tensor:
        """The logits indices in the persistent buffer, padded with the last one to the CUDA-graph size."""
        n = logits_indices.shape[0]
        assert n > 0, "no logits indices"
        buf = self.kv_sharing_fast_prefill_logits_indices
        buf[:n] = logits_indices
        buf[n:] = logits_indices[-1]
        return buf[:self.pad_for_cudagraph(n)]
