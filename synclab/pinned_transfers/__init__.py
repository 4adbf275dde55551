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

The package's rooms, as in every chapter: :mod:`.workloads` (the batches the checks and the profiles
share), :mod:`.checks` (one module per group of sites) and :mod:`.profiling` (counts, timings, bandwidth);
:mod:`.ranks` runs 3.7's real process group. Every check runs as on a GPU machine with pinned memory
(``simulated_pinning(True)``) and, where memory gets pinned, once more as on WSL (``simulated_pinning(False)``).
This module says what the notebook imports.
"""

from synclab.device import to_device
from synclab.pinned_transfers.checks import (CHECKS_3_1, CHECKS_3_2, CHECKS_3_3, CHECKS_3_4, CHECKS_3_5, CHECKS_3_7,
                                             CHECKS_3_8, SNIPPETS, check_async_tensor_h2d, check_bad_words,
                                             check_bincount, check_dp_sync, check_fast_prefill,
                                             check_gather_specific_token_logprobs, check_init_model_kwargs,
                                             check_ngram_and_bad_words, check_ngram_update, check_sync_predictions,
                                             dp_sync_counts, run_bincount)
from synclab.pinned_transfers.profiling import (BANDWIDTH_SIZES, BATCH_SIZES, COPY_VARIANTS, PROFILE_VOCAB,
                                                bandwidth_figures, bandwidth_sweep, component_calls, gather_sweep,
                                                per_step, profile_gather, stale_read, stale_read_text, sync_counts,
                                                sync_table)
from synclab.pinned_transfers.workloads import logprob_case, penalty_state, token_type_case

__all__ = [
    "BANDWIDTH_SIZES", "BATCH_SIZES", "CHECKS_3_1", "CHECKS_3_2", "CHECKS_3_3", "CHECKS_3_4", "CHECKS_3_5",
    "CHECKS_3_7", "CHECKS_3_8", "COPY_VARIANTS", "PROFILE_VOCAB", "SNIPPETS", "bandwidth_figures", "bandwidth_sweep",
    "check_async_tensor_h2d", "check_bad_words", "check_bincount", "check_dp_sync", "check_fast_prefill",
    "check_gather_specific_token_logprobs", "check_init_model_kwargs", "check_ngram_and_bad_words",
    "check_ngram_update", "check_sync_predictions",
    "component_calls", "dp_sync_counts", "gather_sweep", "logprob_case", "penalty_state",
    "per_step", "profile_gather", "run_bincount", "stale_read", "stale_read_text", "sync_counts", "sync_table",
    "to_device", "token_type_case",
]
