"""Chapter 3 — pinned ``non_blocking`` transfers: the whole of PR #41429, its checks and its profiles.

The seven sites of the PR, each with its baseline in ``synclab/engine/``:

* 3.1 ``async_tensor_h2d`` (``engine/torch_utils.py``): host data into pinned memory, then a non-blocking upload;
* 3.2 ``Sampler.gather_specific_token_logprobs`` (``engine/sampler.py``): the id matrix built on pinned host memory;
* 3.3 ``GPUModelRunner._init_model_kwargs`` (``engine/model_inputs.py``): token types from host-side lengths;
* 3.4 ``GPUModelRunner._prepare_kv_sharing_fast_prefill``: the tail padded from a device scalar, not ``.item()``;
* 3.5 ``bincount`` (``engine/penalties.py``): rows zeroed with ``index_fill_``, counts scattered on the device;
* 3.6 predict which sync each snippet performs, then measure;
* 3.7 ``_run_ar`` and ``_synchronize_dp_ranks`` (``engine/dp_utils.py``): each data-parallel rank's
  contribution assembled on the host, one upload, one all-reduce, one read back, on a real process group;
* 3.8 ``update_ngram_gpu_tensors_incremental`` (``engine/ngram_proposer_gpu.py``) and
  ``_apply_bad_words_single_batch`` (``engine/bad_words.py``): index uploads through ``async_tensor_h2d``,
  a banned token written through a slice.

One module per concern: ``uploads`` (3.1–3.4), ``penalties`` (3.5), ``snippets`` (3.6),
``data_parallel`` (3.7), ``ngram`` (3.8), ``profiling``. Every check runs as on a GPU
machine with pinned memory (``simulated_pinning(True)``) and, where memory gets
pinned, once more as on WSL (``simulated_pinning(False)``).
"""

from synclab.device import to_device
from synclab.pinned_transfers.data_parallel import CHECKS_3_7, check_dp_sync, dp_sync_counts
from synclab.pinned_transfers.ngram import CHECKS_3_8, check_bad_words, check_ngram_and_bad_words, check_ngram_update
from synclab.pinned_transfers.penalties import CHECKS_3_5, check_bincount, penalty_state, run_bincount
from synclab.pinned_transfers.profiling import (BANDWIDTH_SIZES, BATCH_SIZES, COPY_VARIANTS, PROFILE_VOCAB,
                                                bandwidth_figures, bandwidth_sweep, component_calls, gather_sweep,
                                                per_step, profile_gather, stale_read, sync_counts,
                                                sync_table)
from synclab.pinned_transfers.snippets import SNIPPETS, check_sync_predictions, measure_snippet_syncs
from synclab.pinned_transfers.uploads import (CHECKS_3_1, CHECKS_3_2, CHECKS_3_3, CHECKS_3_4, check_async_tensor_h2d,
                                              check_fast_prefill, check_gather_specific_token_logprobs,
                                              check_init_model_kwargs, logprob_case, token_type_case)

__all__ = [
    "BANDWIDTH_SIZES", "BATCH_SIZES", "CHECKS_3_1", "CHECKS_3_2", "CHECKS_3_3", "CHECKS_3_4", "CHECKS_3_5",
    "CHECKS_3_7", "CHECKS_3_8", "COPY_VARIANTS", "PROFILE_VOCAB", "SNIPPETS", "bandwidth_figures", "bandwidth_sweep",
    "check_async_tensor_h2d", "check_bad_words", "check_bincount", "check_dp_sync", "check_fast_prefill",
    "check_gather_specific_token_logprobs", "check_init_model_kwargs", "check_ngram_and_bad_words",
    "check_ngram_update", "check_sync_predictions",
    "component_calls", "dp_sync_counts", "gather_sweep", "logprob_case", "measure_snippet_syncs", "penalty_state",
    "per_step", "profile_gather", "run_bincount", "stale_read", "sync_counts", "sync_table", "to_device",
    "token_type_case",
]
