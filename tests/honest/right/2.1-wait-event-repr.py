# Ordering with an event on the compute stream and side.wait_event(...), __repr__ with type(self), a nested helper.
class AsyncPoolingOutput:
    """The result of a CUDA-like step: the outputs are valid once ``get_output()`` returns."""

    def __init__(self, model_runner_output: ModelRunnerOutput, raw_pooler_output: torch.Tensor,
                 finished_mask: list[bool], async_output_copy_stream: torch.cuda.Stream) -> None:
        self.model_runner_output = model_runner_output
        self.raw = raw_pooler_output  # read by the copy: alive until get_output() has waited
        forward_queued = torch.cuda.Event()
        forward_queued.record()  # on the compute stream: the forward queued so far
        self.copied = torch.cuda.Event(blocking=True)
        with torch.cuda.stream(async_output_copy_stream):
            async_output_copy_stream.wait_event(forward_queued)  # the device waits; the host does not
            model_runner_output.pooler_output = _copy_pooler_output_to_cpu(raw_pooler_output, finished_mask)
            self.copied.record()

    def __repr__(self) -> str:
        state = "waiting" if self.raw is not None else "done"
        return f"<{type(self).__name__} {len(self.model_runner_output.req_ids)} requests, {state}>"

    def get_output(self) -> ModelRunnerOutput:
        """Wait for the copy (only the copy), release the device tensors, return the host output."""
        self.copied.synchronize()
        self.raw = None
        return self.model_runner_output


class AsyncOutputRunner(PoolingModelRunner):
    """The runner's output path after PR #39113."""

    def _get_or_create_async_output_copy_stream(self) -> torch.cuda.Stream:
        """The side stream for output copies, created on first use and reused."""
        self.async_output_copy_stream = self.async_output_copy_stream or torch.cuda.Stream()
        return self.async_output_copy_stream

    def _pool(self, hidden_states: torch.Tensor, num_scheduled_tokens: int,
              batch: PoolingBatch) -> ModelRunnerOutput | AsyncPoolingOutput:
        """Pool this step's hidden states [num_tokens, hidden] and hand the finished outputs to the host."""
        def empty_output() -> ModelRunnerOutput:
            return ModelRunnerOutput(req_ids=list(batch.req_ids))

        finished = batch.metadata.get_pooling_cursor().get_finished_mask()
        raw = self.model.pooler(hidden_states[:num_scheduled_tokens], batch.metadata)
        if not any(finished):
            out = empty_output()
            out.pooler_output = [None] * len(batch.req_ids)
            return out
        if current_platform.is_cuda_alike():
            return AsyncPoolingOutput(empty_output(), raw, finished, self._get_or_create_async_output_copy_stream())
        out = empty_output()
        out.pooler_output = _copy_pooler_output_to_cpu(raw, finished)
        self._sync_device()
        return out
