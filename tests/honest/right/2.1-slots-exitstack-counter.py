# __slots__, itertools.count for step ids, contextlib.ExitStack around the stream switch, a nested copy helper.
import contextlib
import itertools

_step_ids = itertools.count()


class AsyncPoolingOutput:
    """The result of a CUDA-like step: the outputs are valid once ``get_output()`` returns."""

    __slots__ = ("step", "_output", "_pending_raw", "_event")

    def __init__(self, model_runner_output: ModelRunnerOutput, raw_pooler_output: torch.Tensor,
                 finished_mask: list[bool], async_output_copy_stream: torch.cuda.Stream) -> None:
        self.step = next(_step_ids)
        self._output = model_runner_output
        self._pending_raw = raw_pooler_output
        self._event = torch.cuda.Event(blocking=True)

        def queue_copy() -> None:
            model_runner_output.pooler_output = _copy_pooler_output_to_cpu(raw_pooler_output, finished_mask)

        main = torch.cuda.current_stream()
        with contextlib.ExitStack() as scope:
            scope.enter_context(torch.cuda.stream(async_output_copy_stream))
            async_output_copy_stream.wait_stream(main)
            queue_copy()
            self._event.record()

    def get_output(self) -> ModelRunnerOutput:
        """Wait for the copy (only the copy), release the device tensors, return the host output."""
        self._event.synchronize()
        self._pending_raw = None
        return self._output


class AsyncOutputRunner(PoolingModelRunner):
    """The runner's output path after PR #39113."""

    def _get_or_create_async_output_copy_stream(self) -> torch.cuda.Stream:
        """The side stream for output copies, created on first use and reused."""
        if self.async_output_copy_stream is not None:
            return self.async_output_copy_stream
        self.async_output_copy_stream = torch.cuda.Stream()
        return self.async_output_copy_stream

    def _pool(self, hidden_states: torch.Tensor, num_scheduled_tokens: int,
              batch: PoolingBatch) -> ModelRunnerOutput | AsyncPoolingOutput:
        """Pool this step's hidden states [num_tokens, hidden] and hand the finished outputs to the host."""
        real_rows = hidden_states[:num_scheduled_tokens]  # the rest is CUDA-graph padding
        raw = self.model.pooler(real_rows, batch.metadata)
        finished = batch.metadata.get_pooling_cursor().get_finished_mask()
        output = ModelRunnerOutput(list(batch.req_ids))
        nothing_to_copy = not any(finished)
        if nothing_to_copy or not current_platform.is_cuda_alike():
            output.pooler_output = [None] * len(finished) if nothing_to_copy else _copy_pooler_output_to_cpu(raw, finished)
            if not nothing_to_copy:
                self._sync_device()
            return output
        return AsyncPoolingOutput(output, raw, finished, self._get_or_create_async_output_copy_stream())
