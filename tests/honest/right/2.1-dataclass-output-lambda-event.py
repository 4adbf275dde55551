# A dataclass for the async output (the copy queued in __post_init__), a top-level lambda for the event, getattr.
from dataclasses import dataclass, field

new_ready_event = lambda: torch.cuda.Event(blocking=True)  # looked up when called: the lab's streams are in place


@dataclass
class AsyncPoolingOutput:
    """The result of a CUDA-like step: the outputs are valid once ``get_output()`` returns."""

    model_runner_output: ModelRunnerOutput
    raw_pooler_output: torch.Tensor | None
    finished_mask: list[bool]
    async_output_copy_stream: torch.cuda.Stream
    ready: object = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.ready = new_ready_event()
        producer = torch.cuda.current_stream()  # the compute stream, where the forward was queued
        with torch.cuda.stream(self.async_output_copy_stream):
            self.async_output_copy_stream.wait_stream(producer)
            self.model_runner_output.pooler_output = _copy_pooler_output_to_cpu(
                self.raw_pooler_output, self.finished_mask)
            self.ready.record()

    def get_output(self) -> ModelRunnerOutput:
        """Wait for the copy (only the copy), release the device tensors, return the host output."""
        self.ready.synchronize()
        self.raw_pooler_output = None  # the copy has landed: the allocator may have the memory back
        return self.model_runner_output


class AsyncOutputRunner(PoolingModelRunner):
    """The runner's output path after PR #39113."""

    def _get_or_create_async_output_copy_stream(self) -> torch.cuda.Stream:
        """The side stream for output copies, created on first use and reused."""
        stream = getattr(self, "async_output_copy_stream", None)
        if stream is None:
            stream = self.async_output_copy_stream = torch.cuda.Stream()
        return stream

    def _pool(self, hidden_states: torch.Tensor, num_scheduled_tokens: int,
              batch: PoolingBatch) -> ModelRunnerOutput | AsyncPoolingOutput:
        """Pool this step's hidden states [num_tokens, hidden] and hand the finished outputs to the host."""
        pooled = self.model.pooler(hidden_states[:num_scheduled_tokens], batch.metadata)
        mask = batch.metadata.get_pooling_cursor().get_finished_mask()
        result = ModelRunnerOutput(req_ids=list(batch.req_ids), pooler_output=[None] * len(mask))
        if True not in mask:
            return result
        if current_platform.is_cuda_alike():
            return AsyncPoolingOutput(result, pooled, mask, self._get_or_create_async_output_copy_stream())
        result.pooler_output = _copy_pooler_output_to_cpu(pooled, mask)
        self._sync_device()
        return result
