# The copy's event made as at #39113, a default torch.cuda.Event(): get_output()'s wait never sleeps (it spins or
# yields), where vLLM since #47081, and the contract, make it a blocking one.
# fails: syncs
class AsyncPoolingOutput:
    """The result of a CUDA-like step: the outputs are valid once ``get_output()`` returns."""

    def __init__(self, model_runner_output: ModelRunnerOutput, raw_pooler_output: torch.Tensor,
                 finished_mask: list[bool], async_output_copy_stream: torch.cuda.Stream) -> None:
        self._model_runner_output = model_runner_output
        self._raw_pooler_output = raw_pooler_output  # the side stream reads them: keep them alive
        self.async_copy_ready_event = torch.cuda.Event()  # as at #39113: its wait spins or yields
        compute_stream = torch.cuda.current_stream()
        with torch.cuda.stream(async_output_copy_stream):
            async_output_copy_stream.wait_stream(compute_stream)  # copy only what the forward has written
            model_runner_output.pooler_output = _copy_pooler_output_to_cpu(raw_pooler_output, finished_mask)
            self.async_copy_ready_event.record()  # after the copies: waiting on it waits for them

    def get_output(self) -> ModelRunnerOutput:
        """Wait for the copy (only the copy), release the device tensors, return the host output."""
        self.async_copy_ready_event.synchronize()
        del self._raw_pooler_output  # now the allocator may reuse their memory
        return self._model_runner_output


class AsyncOutputRunner(PoolingModelRunner):
    """The runner's output path after the chapter's fix."""

    def _get_or_create_async_output_copy_stream(self) -> torch.cuda.Stream:
        """The side stream for output copies, created on first use and reused."""
        if self.async_output_copy_stream is None:
            self.async_output_copy_stream = torch.cuda.Stream()
        return self.async_output_copy_stream

    def _pool(self, hidden_states: torch.Tensor, num_scheduled_tokens: int,
              batch: PoolingBatch) -> ModelRunnerOutput | AsyncPoolingOutput:
        """Pool this step's hidden states [num_tokens, hidden] and hand the finished outputs to the host."""
        raw = self.model.pooler(hidden_states[:num_scheduled_tokens], batch.metadata)
        finished = batch.metadata.get_pooling_cursor().get_finished_mask()  # host list, no sync (API since #53464)
        output = ModelRunnerOutput(req_ids=list(batch.req_ids))
        if not any(finished):  # only unfinished chunks: nothing to copy
            output.pooler_output = [None] * len(finished)
            return output
        if not current_platform.is_cuda_alike():  # CPU / XPU: no CUDA streams to use
            output.pooler_output = _copy_pooler_output_to_cpu(raw, finished)
            self._sync_device()
            return output
        return AsyncPoolingOutput(output, raw, finished, self._get_or_create_async_output_copy_stream())