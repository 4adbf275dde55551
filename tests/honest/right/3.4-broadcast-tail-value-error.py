# The tail filled by broadcasting the last index on the device (expand, then copy_), and an empty step refused with
# a ValueError of its own rather than vLLM's assert.
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
        n = len(logits_indices)
        if n == 0:
            raise ValueError("no logits indices: the scheduler should not have scheduled this step")
        buf = self.kv_sharing_fast_prefill_logits_indices
        head, tail = buf[:n], buf[n:]
        head.copy_(logits_indices, non_blocking=True)
        tail.copy_(logits_indices[-1:].expand(tail.shape[0]))  # a device broadcast: no value read back
        return buf[:self.pad_for_cudagraph(n)]
