# torch on the host (repeat_interleave, cumsum), a pinned torch.empty(...).copy_(), getattr and type(self) in a log line
import logging

log = logging.getLogger("synclab.answers.ch3")


class PinnedInputsRunner(GPUModelRunner):
    def _init_model_kwargs(self) -> dict[str, Any]:
        """``{"token_type_ids": [total_tokens] int32 device}``, or ``{}`` when no request carries token types."""
        if not getattr(self, "is_pooling_model", False):
            return {}
        marked = self._token_type_id_requests()
        if not marked:
            return {}
        lens = self.optimistic_seq_lens_cpu[:self.input_batch.num_reqs].long()  # [num_reqs] host
        cut = lens.clone()
        cut[list(marked)] = torch.tensor(list(marked.values()), dtype=torch.long)  # host indexing, host values
        total = int(lens.sum())  # a host tensor: no device involved
        offsets = torch.cumsum(lens, 0) - lens
        within = torch.arange(total) - torch.repeat_interleave(offsets, lens)
        staged = torch.empty(total, dtype=torch.int32, pin_memory=self.pin_memory)
        staged.copy_(within >= torch.repeat_interleave(cut, lens))
        log.debug("%s: %d token types for %d requests", type(self).__name__, total, len(lens))
        return {"token_type_ids": staged.to(device=self.device, non_blocking=True)}

    def _prepare_kv_sharing_fast_prefill(self, logits_indices: torch.Tensor) -> torch.Tensor:
        """The logits indices in the persistent buffer, padded with the last one to the CUDA-graph size."""
        count = logits_indices.size(0)
        if count < 1:
            raise IndexError("no logits indices to pad")
        persistent = self.kv_sharing_fast_prefill_logits_indices
        persistent.narrow(0, 0, count).copy_(logits_indices)
        rest = persistent.size(0) - count
        persistent.narrow(0, count, rest).copy_(logits_indices[-1].expand(rest))
        return persistent.narrow(0, 0, self.pad_for_cudagraph(count))
