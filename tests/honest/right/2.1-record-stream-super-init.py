# Lifetime by record_stream on the side stream, the event recorded with an explicit stream, super().__init__, env switch.
import os

TRACE = os.environ.get("RUNNER_TRACE") == "1"


def _device_tensors(raw):
    """The tensors a pooler returned: one [num_reqs, hidden] tensor, or a list with None for unfinished requests."""
    if isinstance(raw, torch.Tensor):
        yield raw
    else:
        yield from (t for t in raw if t is not None)


class AsyncPoolingOutput:
    """The result of a CUDA-like step: the outputs are valid once ``get_output()`` returns."""

    def __init__(self, model_runner_output: ModelRunnerOutput, raw_pooler_output: torch.Tensor,
                 finished_mask: list[bool], async_output_copy_stream: torch.cuda.Stream) -> None:
        side = async_output_copy_stream
        self._output = model_runner_output
        self._copied = torch.cuda.Event(blocking=True)
        side.wait_stream(torch.cuda.current_stream())  # called before switching: current is the compute stream
        with torch.cuda.stream(side):
            model_runner_output.pooler_output = _copy_pooler_output_to_cpu(raw_pooler_output, finished_mask)
        self._copied.record(side)  # on the side stream, after its copies
        for t in _device_tensors(raw_pooler_output):
            t.record_stream(side)  # the allocator keeps the block until the side stream's copy is done
        # no reference to raw_pooler_output is kept here

    def get_output(self) -> ModelRunnerOutput:
        """Wait for the copy (only the copy), release the device tensors, return the host output."""
        self._copied.synchronize()
        if TRACE:
            print("get_output: copy landed for", len(self._output.req_ids), "requests")
        return self._output


class AsyncOutputRunner(PoolingModelRunner):
    """The runner's output path after PR #39113."""

    def __init__(self, model) -> None:
        super().__init__(model)
        self.steps = 0

    def _get_or_create_async_output_copy_stream(self) -> torch.cuda.Stream:
        """The side stream for output copies, created on first use and reused."""
        if self.async_output_copy_stream is None:
            self.async_output_copy_stream = torch.cuda.Stream()
        return self.async_output_copy_stream

    def _pool(self, hidden_states: torch.Tensor, num_scheduled_tokens: int,
              batch: PoolingBatch) -> ModelRunnerOutput | AsyncPoolingOutput:
        """Pool this step's hidden states [num_tokens, hidden] and hand the finished outputs to the host."""
        self.steps += 1
        raw = self.model.pooler(hidden_states[:num_scheduled_tokens], batch.metadata)
        finished = batch.metadata.get_pooling_cursor().get_finished_mask()
        output = ModelRunnerOutput(req_ids=list(batch.req_ids))
        if not any(finished):
            output.pooler_output = [None for _ in finished]
        elif not current_platform.is_cuda_alike():
            output.pooler_output = _copy_pooler_output_to_cpu(raw, finished)
            self._sync_device()
        else:
            return AsyncPoolingOutput(output, raw, finished, self._get_or_create_async_output_copy_stream())
        return output
