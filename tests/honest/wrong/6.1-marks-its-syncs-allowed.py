# Keeps the planted runner's syncs and wraps each feature hook in gpu_sync_allowed(): the syncs are marked, not gone.
# fails: planted-outputs
from synclab.syncs import gpu_sync_allowed


def clean_runner() -> type[PlantedRunner]:
    """``PlantedRunner`` with every stray sync removed and every feature kept."""

    class CleanRunner(PlantedRunner):
        def _apply_sampling_extras(self, logits, reqs):
            with gpu_sync_allowed():
                return super()._apply_sampling_extras(logits, reqs)

        def _stopped_on_device(self, sampled, reqs):
            with gpu_sync_allowed():
                return super()._stopped_on_device(sampled, reqs)

    return CleanRunner
