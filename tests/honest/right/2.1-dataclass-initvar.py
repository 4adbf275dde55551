# AsyncPoolingOutput as a dataclass: the mask and the stream are InitVars, used in __post_init__ and not kept.
# A learner's check compiles the cell as a kernel does (without the lab's own __future__ annotations), so the
# InitVars are InitVars there too.
from dataclasses import InitVar, dataclass, field


@dataclass
class AsyncPoolingOutput:
    """The result of a CUDA-like step: the outputs are valid once ``get_output()`` returns."""

    model_runner_output: ModelRunnerOutput
    raw_pooler_output: torch.Tensor | None
    finished_mask: InitVar[list[bool]]
    async_output_copy_stream: InitVar[torch.cuda.Stream]
    copied: torch.cuda.Event = field(default_factory=lambda: torch.cuda.Event(blocking=True))

    def __post_init__(self, finished_mask: list[bool], async_output_copy_stream: torch.cuda.Stream) -> None:
        compute = torch.cuda.current_stream()
        with torch.cuda.stream(async_output_copy_stream):
            async_output_copy_stream.wait_stream(compute)
            self.model_runner_output.pooler_output = _copy_pooler_output_to_cpu(self.raw_pooler_output,
                                                                                finished_mask)
            self.copied.record()

    def get_output(self) -> ModelRunnerOutput:
        """Wait for the copy (only the copy), release the device tensors, return the host output."""
        self.copied.synchronize()
        self.raw_pooler_output = None
        return self.model_runner_output


class AsyncOutputRunner(PoolingModelRunner):
    """The runner's output path after PR #39113."""

    def _get_or_create_async_output_copy_stream(self) -> torch.cuda.Stream:
        """The side stream for output copies, created on first use and reused."""
        if self.async_output_copy_stream is None:
            self.async_output_copy_stream = torch.cuda.Stream()
        return self.async_output_copy_stream

    def _pool(self, hidden_states: torch.Tensor, num_scheduled_tokens: int,
              batch: PoolingBatch) -> ModelRunnerOutput | AsyncPoolingOutput:
        """Pool this step's hidden states [num_tokens, hidden] and hand the finished outputs to the host."""
        raw = self.model.pooler(hidden_states[:num_scheduled_tokens], batch.metadata)
        finished = batch.metadata.get_pooling_cursor().get_finished_mask()
        output = ModelRunnerOutput(req_ids=list(batch.req_ids))
        if not any(finished):
            output.pooler_output = [None] * len(finished)
            return output
        if not current_platform.is_cuda_alike():
            output.pooler_output = _copy_pooler_output_to_cpu(raw, finished)
            self._sync_device()
            return output
        return AsyncPoolingOutput(output, raw, finished, self._get_or_create_async_output_copy_stream())
