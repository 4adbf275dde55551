"""The book's fixes of chapters 1-5, as chapter 6's engine runs them: answers, kept from the reader's code.

Taught in chapters 1-5 (each fix's docstring names its chapter and exercise); run by chapter 6
(the capstone). Chapter 6's checks (6.1's runner, 6.2's counts) run the engine with the book's fixes
whatever the reader has written (:func:`synclab.capstone.workloads.book_fixes`), and the engine needs a
scheduler while Exercise 5.2 is not written. A learner's install has no ``solutions/``, so those fixes
live here, each the code of its solution notebook: ``tests/test_capstone.py`` checks that they count
the same syncs and compute the same results as ``load_fixes("solutions")`` on chapter 6's workloads.

Each is marked ``@answer_key`` with its exercise: a reader's code may not call one in place of their own
(while that exercise's checks run, and outside any check; the upload, which a reader's 6.1 runner calls
through the engine, only while 3.1's checks run); the engine runs them for chapter 6's checks.
No chapter imports another, so they live in chapter 6's package, not in their chapters' checks rooms.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

import numpy as np
import torch

from synclab.answer_keys import answer_key  # marks the package's versions: no answer may call them
from synclab.device import DeviceLike, is_pin_memory_available
from synclab.engine.bad_words import _SMALLEST_LOGIT
from synclab.engine.input_batch import PLACEHOLDER, InputBatch
from synclab.engine.mm_inputs import PlaceholderRange
from synclab.engine.pool_metadata import PoolingCursor, PoolingMetadata
from synclab.engine.pooler import PoolerOutput, TokenPoolingMethod
from synclab.engine.sampler import LogprobsTensors, Sampler, compute_token_logprobs
from synclab.engine.scheduler import Request, Scheduler
from synclab.engine.torch_utils import HostData


# ----------------------------------------------------------------------------- chapter 1


@answer_key("1.1")
class _AllPoolReference(TokenPoolingMethod):
    """Chapter 1, Exercise 1.1: ALL pooling as PR #41163 left it: slice the sub-group once, then split."""

    def split_hidden_states(self, hidden_states: torch.Tensor, cursor: PoolingCursor) -> list[torch.Tensor]:
        """This sub-group's rows of ``hidden_states`` [num_tokens, hidden], one view per request, in 2 syncs."""
        split_sizes = cursor.num_scheduled_tokens_cpu.tolist()  # host tensor: no sync
        if not split_sizes:
            return []
        group_start = int(cursor.first_token_indices_gpu[0].item())  # sync 1
        group_end = int(cursor.last_token_indices_gpu[-1].item()) + 1  # sync 2
        group = hidden_states[group_start:group_end]  # [sum(split_sizes), hidden] view
        return list(group.split(split_sizes))  # [num_scheduled_i, hidden] views

    def forward(self, hidden_states: torch.Tensor, pooling_metadata: PoolingMetadata) -> PoolerOutput:
        """One item per request: its hidden states once its prompt is complete, else ``None``."""
        cursor = pooling_metadata.get_pooling_cursor()
        chunks = self.split_hidden_states(hidden_states, cursor)
        if not self.enable_chunked_prefill:
            return [c.clone() for c in chunks] if self.clone_finished else chunks
        finished = cursor.get_finished_mask()  # host list: no sync
        for state, chunk, done in zip(pooling_metadata.pooling_states, chunks, finished):
            # kept across steps, or read after the next forward: must not alias the buffer
            owned = (not done) or (self.clone_finished and not state.hidden_states_cache)
            state.hidden_states_cache.append(chunk.clone() if owned else chunk)
        outputs: PoolerOutput = []
        for state, done in zip(pooling_metadata.pooling_states, finished):
            if not done:
                outputs.append(None)
                continue
            cache = state.hidden_states_cache
            outputs.append(cache[0] if len(cache) == 1 else torch.cat(cache, dim=0))  # cat: new storage
            state.clean()
        return outputs


@answer_key("1.2")
class _AllPoolNoSyncReference(_AllPoolReference):
    """Chapter 1, Exercise 1.2: the caller slices the sub-group, the pooler splits by host sizes (0 syncs)."""

    receives_group_rows = True  # the dispatcher hands this pooler exactly its sub-group's rows

    def split_hidden_states(self, hidden_states: torch.Tensor, cursor: PoolingCursor) -> list[torch.Tensor]:
        """``hidden_states`` [sum(sizes), hidden] holds exactly this sub-group's rows; one view per request."""
        split_sizes = cursor.num_scheduled_tokens_cpu.tolist()  # host tensor: no sync
        if hidden_states.shape[0] != sum(split_sizes):  # shapes live on the host: no sync
            raise ValueError(f"hidden_states has {hidden_states.shape[0]} rows, but this sub-group was scheduled "
                             f"{sum(split_sizes)} tokens: the caller must pass exactly the sub-group's rows")
        return list(hidden_states.split(split_sizes))  # [num_scheduled_i, hidden] views


# ----------------------------------------------------------------------------- chapter 2


@answer_key("2.1", scope="checks")  # chapter 6 runs it: the students' install ships it, an answer's process does not
def _output_copy_stream_reference(runner: Any) -> torch.cuda.Stream:
    """Chapter 2, Exercise 2.1 (``_get_or_create_async_output_copy_stream``): the side stream, made on first use."""
    if runner.async_output_copy_stream is None:
        runner.async_output_copy_stream = torch.cuda.Stream()
    return runner.async_output_copy_stream


# ----------------------------------------------------------------------------- chapter 3


# The engine's upload (EngineRunner.upload) runs this for any runner's code, and the hooks a reader writes in 6.1
# upload: so, as the code before a PR, it refuses the reader's code only while 3.1's checks run.
@answer_key("3.1", scope="checks")
def _async_tensor_h2d_reference(data: HostData, device: DeviceLike, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Chapter 3, Exercise 3.1: ``data`` (a list, an array, a CPU tensor) up through pinned memory, no wait."""
    pin = is_pin_memory_available()  # vLLM reads this once, as the module constant PIN_MEMORY
    if isinstance(data, np.ndarray):
        data = torch.from_numpy(data)  # a view of the array: no copy yet
    if isinstance(data, torch.Tensor):
        # contiguous first: torch uploads a strided tensor through a pageable temporary of its own (a staging copy)
        host = data.contiguous().pin_memory() if pin else data  # pin_memory() returns a pinned one as it is
    else:
        host = torch.tensor(data, dtype=dtype, pin_memory=pin)
    return host.to(device=device, dtype=dtype, non_blocking=True)


@answer_key("3.2")
class _PinnedSamplerReference(Sampler):
    """Chapter 3, Exercise 3.2: the requested ids' matrix built on the host, pinned, and sent up without a wait."""

    def gather_specific_token_logprobs(self, logits: torch.Tensor, logprob_token_ids: dict[int, list[int]],
                                       sampled: torch.Tensor) -> LogprobsTensors | None:
        """``logits`` [batch, vocab] (device), ``sampled`` [batch] int64 (device); None when no request asked."""
        if not logprob_token_ids:
            return None
        batch_size = logits.shape[0]
        device = logits.device
        max_num_tokens = max(len(tids) for tids in logprob_token_ids.values())
        token_ids_cpu = torch.zeros(batch_size, max_num_tokens + 1, dtype=torch.int64, pin_memory=self.pin_memory)
        valid_mask_cpu = torch.zeros(batch_size, max_num_tokens + 1, dtype=torch.bool, pin_memory=self.pin_memory)
        valid_mask_cpu[:, 0] = True  # the sampled token is always valid
        for req_idx, token_ids in logprob_token_ids.items():
            num_tokens = len(token_ids)
            token_ids_cpu[req_idx, 1:num_tokens + 1] = torch.as_tensor(token_ids, dtype=torch.int64)
            valid_mask_cpu[req_idx, 1:num_tokens + 1] = True
        token_ids_tensor = token_ids_cpu.to(device, non_blocking=True)  # [batch, max_num_tokens + 1]
        valid_mask = valid_mask_cpu.to(device, non_blocking=True)
        token_ids_tensor[:, 0] = sampled  # on the device: reading `sampled` back would be a sync
        logprobs = compute_token_logprobs(logits, token_ids_tensor).masked_fill(~valid_mask, float("-inf"))
        sampled_logits = logits.gather(-1, sampled.unsqueeze(-1))  # [batch, 1]
        token_ranks = (logits > sampled_logits).sum(dim=-1)  # [batch]
        return LogprobsTensors(token_ids_tensor.to(torch.int32), logprobs, token_ranks)


@answer_key("3.8")
def _apply_bad_words_single_batch_reference(logits: torch.Tensor, bad_words_token_ids: list[list[int]],
                                            past_tokens_ids: list[int]) -> None:
    """Chapter 3, Exercise 3.8: ban each bad word whose prefix ends the history; ``logits`` [vocab], in place."""
    for bad_word_ids in bad_words_token_ids:
        if len(bad_word_ids) > len(past_tokens_ids) + 1:
            continue  # cannot match yet
        prefix_length = len(bad_word_ids) - 1
        last_token_id = bad_word_ids[-1]
        actual_prefix = past_tokens_ids[-prefix_length:] if prefix_length > 0 else []
        if actual_prefix == bad_word_ids[:prefix_length]:
            logits[last_token_id:last_token_id + 1] = _SMALLEST_LOGIT  # shapes differ: a fill, nothing copied


# ----------------------------------------------------------------------------- chapter 4


@answer_key("4.1")
class _ReverseScanBatchReference(InputBatch):
    """Chapter 4, Exercise 4.1: the placeholders found from the end of each output, after one wait per step."""

    def update_async_output_token_ids(self) -> None:
        """Replace each request's trailing -1 placeholders with the ids sampled last step (in place)."""
        output_token_ids = self.sampling_metadata.output_token_ids
        if self.sampled_token_ids_cpu is None or not output_token_ids:
            return
        sampled_token_ids = None
        for index, req_id in enumerate(self.req_ids):
            prev_index = self.prev_req_id_to_index.get(req_id)
            if prev_index is None:
                continue  # a new request: nothing in flight
            req_output_token_ids = output_token_ids[index]
            if not req_output_token_ids or req_output_token_ids[-1] != PLACEHOLDER:
                continue  # no trailing placeholder
            if sampled_token_ids is None:
                self.async_copy_ready_event.synchronize()  # the first request that needs them: once per step
                sampled_token_ids = self.sampled_token_ids_cpu.tolist()  # [prev_num_reqs][1 + num_spec]
            new_ids: list[int] = sampled_token_ids[prev_index]
            if not new_ids:
                continue
            num_sampled_ids = len(new_ids) if new_ids[-1] != PLACEHOLDER else new_ids.index(PLACEHOLDER)
            first_placeholder = len(req_output_token_ids)  # walk back over the placeholders only
            while first_placeholder > 0 and req_output_token_ids[first_placeholder - 1] == PLACEHOLDER:
                first_placeholder -= 1
            num_to_replace = min(num_sampled_ids, len(req_output_token_ids) - first_placeholder)
            del new_ids[num_to_replace:]
            req_output_token_ids[first_placeholder:] = new_ids  # in place: the request state sees it


# ----------------------------------------------------------------------------- chapter 5


@answer_key("5.1")
class _ListCachedRangeReference(PlaceholderRange):
    """Chapter 5, Exercise 5.1: ``PlaceholderRange`` as PR #40143 left it, the cumsum cached as a Python list."""

    @cached_property
    def embeds_cumsum(self) -> list[int] | None:
        """``cumsum(is_embed)`` [length] as a list of int, computed once (None without a mask)."""
        return None if self.is_embed is None else self.is_embed.cumsum(dim=0).tolist()

    def get_num_embeds(self) -> int:
        if self.embeds_cumsum is None:
            return self.length
        return self.embeds_cumsum[-1] if self.embeds_cumsum else 0  # an empty mask has no [-1]

    def get_embeds_indices_in_range(self, start_idx: int, end_idx: int) -> tuple[int, int]:
        if self.embeds_cumsum is None:
            return start_idx, end_idx
        embeds_start_idx = self.embeds_cumsum[start_idx - 1] if start_idx > 0 else 0  # [-1] would read the total
        embeds_end_idx = self.embeds_cumsum[end_idx - 1] if end_idx > 0 else 0
        return embeds_start_idx, embeds_end_idx


@answer_key("5.2")
class _EncoderSchedulerReference(Scheduler):
    """Chapter 5, Exercise 5.2: vLLM's encoder scheduling, asking each item's range (cheap once 5.1 caches it)."""

    def _try_schedule_encoder_inputs(self, request: Request, num_computed_tokens: int, num_new_tokens: int,
                                     encoder_compute_budget: int) -> tuple[list[int], int, int]:
        """(items to encode this step, ``num_new_tokens``, ``encoder_compute_budget``), both adjusted."""
        if num_new_tokens == 0 or not request.has_encoder_inputs:
            return [], num_new_tokens, encoder_compute_budget
        encoder_inputs_to_schedule: list[int] = []
        mm_hashes_to_schedule: set[str] = set()  # identifiers scheduled this step
        num_embeds_to_schedule = 0
        window_end = num_computed_tokens + num_new_tokens
        for i, mm_feature in enumerate(request.mm_features):
            pos = mm_feature.mm_position
            start_pos, num_encoder_tokens = pos.offset, pos.length
            num_encoder_embeds = pos.get_num_embeds()  # asked of every item, every step
            if start_pos >= window_end:
                break  # items are sorted by offset
            if start_pos + num_encoder_tokens <= num_computed_tokens:
                continue  # already computed
            if mm_feature.identifier in mm_hashes_to_schedule:
                continue  # the same image, already scheduled for this request this step
            if self.encoder_cache_manager.check_and_update_cache(request, i):
                continue  # encoded in an earlier step (or for another request)
            if (self.scheduler_config.disable_chunked_mm_input and num_computed_tokens < start_pos
                    and window_end < start_pos + num_encoder_tokens):
                num_new_tokens = start_pos - num_computed_tokens  # do not split the item: stop before it
                break
            if not self.encoder_cache_manager.can_allocate(request, i, encoder_compute_budget,
                                                           num_embeds_to_schedule):
                num_new_tokens = start_pos - num_computed_tokens if num_computed_tokens < start_pos else 0
                break
            start_idx_rel = max(0, num_computed_tokens - start_pos)
            end_idx_rel = min(num_encoder_tokens, window_end - start_pos)
            embeds_start, embeds_end = pos.get_embeds_indices_in_range(start_idx_rel, end_idx_rel)
            if embeds_end - embeds_start == 0:
                continue  # the window holds only this item's non-embedding tokens
            num_embeds_to_schedule += num_encoder_embeds
            encoder_compute_budget -= num_encoder_embeds  # the whole item, not just the window's part
            mm_hashes_to_schedule.add(mm_feature.identifier)
            encoder_inputs_to_schedule.append(i)
        return encoder_inputs_to_schedule, num_new_tokens, encoder_compute_budget


# The Components field each fix fills (synclab.engine.engine_core.Components), as workloads.FIXES names them.
BOOK_FIXES: dict[str, Any] = {
    "all_pool": _AllPoolNoSyncReference,
    "output_copy_stream": _output_copy_stream_reference,
    "async_tensor_h2d": _async_tensor_h2d_reference,
    "sampler": _PinnedSamplerReference,
    "bad_words_single_batch": _apply_bad_words_single_batch_reference,
    "input_batch": _ReverseScanBatchReference,
    "placeholder_range": _ListCachedRangeReference,
    "scheduler": _EncoderSchedulerReference,
}
