"""Two inputs the model runner prepares each step, and the syncs they used to cost.

Taught in chapter 3 (pinned ``non_blocking`` transfers). Names follow
``vllm/v1/worker/gpu_model_runner.py``:

* ``_init_model_kwargs`` — for cross-encoders (BERT-style rerankers), the
  ``token_type_ids`` of the flat batch: 0 for the query's tokens, 1 from the
  document's first token on. A request carries that boundary as
  ``pooling_params.extra_kwargs["compressed_token_type_ids"]``; requests without
  it are all zeros.
* ``_prepare_kv_sharing_fast_prefill`` — with KV-sharing fast prefill (YOCO),
  the logits indices are written into a persistent device buffer and the tail,
  up to the CUDA-graph size, is padded with the last valid index (stale values
  from a larger earlier step could point past this batch).

:class:`GPUModelRunner` holds the state these read; :class:`GPUModelRunnerBaseline`
is the code before PR #41429 (sequence lengths read from the device, a blocking
upload, a ``.item()`` to pad). The reader writes both methods in Exercises 3.3 and 3.4.

The lab keeps one simplification: ``optimistic_seq_lens_cpu`` (vLLM's host-side
upper bound on each sequence length under async scheduling) equals the real
lengths, which holds for the encoder-only models that use token types.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

from synclab.device import DeviceLike, is_pin_memory_available, pick_device, to_device
from synclab.engine.pool_metadata import PoolingParams
from synclab.answer_keys import answer_key  # marks the package's versions: no answer may call them


CUDAGRAPH_CAPTURE_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


@dataclass
class InputBatch:
    """The requests of the current step, in batch order (the part of vLLM's ``InputBatch`` used here)."""

    pooling_params: list[PoolingParams] = field(default_factory=list)

    @property
    def num_reqs(self) -> int:
        return len(self.pooling_params)

    def get_pooling_params(self) -> list[PoolingParams]:
        return self.pooling_params


class GPUModelRunner:
    """The runner state that ``_init_model_kwargs`` and ``_prepare_kv_sharing_fast_prefill`` read."""

    def __init__(self, max_num_reqs: int = 256, max_num_tokens: int = 8192, device: DeviceLike | None = None,
                 is_pooling_model: bool = True) -> None:
        self.device = device if device is not None else pick_device()
        self.pin_memory = is_pin_memory_available()  # False on WSL
        self.is_pooling_model = is_pooling_model
        self.max_num_tokens = max_num_tokens
        self.input_batch = InputBatch()
        self.seq_lens = to_device(torch.zeros(max_num_reqs, dtype=torch.int32), self.device)  # [max_num_reqs] device
        self.optimistic_seq_lens_cpu = torch.zeros(max_num_reqs, dtype=torch.int32)  # [max_num_reqs] host mirror
        # [max_num_tokens] int32 device, persistent: CUDA graphs replay with this buffer's address.
        self.kv_sharing_fast_prefill_logits_indices = to_device(torch.zeros(max_num_tokens, dtype=torch.int32),
                                                                self.device)

    def set_requests(self, pooling_params: Sequence[PoolingParams], seq_lens: Sequence[int]) -> None:
        """Schedule a step: the requests, and each one's sequence length on the device and on the host."""
        if len(pooling_params) != len(seq_lens):
            raise ValueError(f"{len(pooling_params)} requests but {len(seq_lens)} sequence lengths")
        n = len(seq_lens)
        self.input_batch = InputBatch(list(pooling_params))
        self.seq_lens[:n].copy_(torch.tensor(seq_lens, dtype=torch.int32))  # outside any counted region
        self.optimistic_seq_lens_cpu[:n] = torch.tensor(seq_lens, dtype=torch.int32)

    def pad_for_cudagraph(self, num_tokens: int) -> int:
        """The CUDA-graph size a step of ``num_tokens`` runs at: the next captured size, or eager beyond them."""
        i = bisect.bisect_left(CUDAGRAPH_CAPTURE_SIZES, num_tokens)
        return CUDAGRAPH_CAPTURE_SIZES[i] if i < len(CUDAGRAPH_CAPTURE_SIZES) else num_tokens

    def _token_type_id_requests(self) -> dict[int, int]:
        """``{batch index: first type-1 position}`` for the requests that carry compressed token types."""
        found = {}
        for i, param in enumerate(self.input_batch.get_pooling_params()):
            if param.extra_kwargs is not None and (pos := param.extra_kwargs.get("compressed_token_type_ids")) is not None:
                found[i] = pos
        return found

    def _init_model_kwargs(self) -> dict[str, Any]:
        raise NotImplementedError

    def _prepare_kv_sharing_fast_prefill(self, logits_indices: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


class GPUModelRunnerBaseline(GPUModelRunner):
    """Before PR #41429."""

    @answer_key("3.3", role="vLLM's code before #41429", scope="checks", name="GPUModelRunnerBaseline._init_model_kwargs")
    def _init_model_kwargs(self) -> dict[str, Any]:
        model_kwargs: dict[str, Any] = {}
        if not self.is_pooling_model:
            return model_kwargs
        num_reqs = self.input_batch.num_reqs
        token_type_id_requests = self._token_type_id_requests()
        if not token_type_id_requests:
            return model_kwargs
        seq_lens = self.seq_lens[:num_reqs]  # [num_reqs] device
        token_type_ids = []
        for i in range(num_reqs):
            # vLLM passed the 0-d device tensor to torch.arange, which reads it back the same way: one sync.
            seq_len = int(seq_lens[i])
            pos = token_type_id_requests.get(i, seq_len)
            token_type_ids.append((torch.arange(seq_len) >= pos).int())
        model_kwargs["token_type_ids"] = torch.concat(token_type_ids).to(device=self.device)  # blocking upload
        return model_kwargs

    @answer_key("3.4", role="vLLM's code before #41429", scope="checks", name="GPUModelRunnerBaseline._prepare_kv_sharing_fast_prefill")
    def _prepare_kv_sharing_fast_prefill(self, logits_indices: torch.Tensor) -> torch.Tensor:
        num_logits = logits_indices.shape[0]
        assert num_logits > 0
        buf = self.kv_sharing_fast_prefill_logits_indices
        buf[:num_logits].copy_(logits_indices)
        buf[num_logits:].fill_(logits_indices[-1].item())  # .item(): the host waits for the device
        return buf[:self.pad_for_cudagraph(num_logits)]
