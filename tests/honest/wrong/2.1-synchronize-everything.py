# Plays safe in get_output() with torch.cuda.synchronize(): it waits for the next step's forward too.
# fails: syncs
class AsyncPoolingOutput:
    def __init__(self, model_runner_output, raw_pooler_output, finished_mask, async_output_copy_stream) -> None:
        self.output = model_runner_output
        self.raw = raw_pooler_output
        compute = torch.cuda.current_stream()
        with torch.cuda.stream(async_output_copy_stream):
            async_output_copy_stream.wait_stream(compute)
            self.output.pooler_output = _copy_pooler_output_to_cpu(raw_pooler_output, finished_mask)

    def get_output(self) -> ModelRunnerOutput:
        torch.cuda.synchronize()
        self.raw = None
        return self.output


class AsyncOutputRunner(PoolingModelRunner):
    def _get_or_create_async_output_copy_stream(self):
        if self.async_output_copy_stream is None:
            self.async_output_copy_stream = torch.cuda.Stream()
        return self.async_output_copy_stream

    def _pool(self, hidden_states, num_scheduled_tokens, batch):
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
