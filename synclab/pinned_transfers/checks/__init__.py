"""Chapter 3's checks, one module per group of sites of PR #41429.

A room of :mod:`synclab.pinned_transfers`, split by concern: :mod:`.uploads` (3.1–3.4),
:mod:`.penalties` (3.5), :mod:`.snippets` (3.6), :mod:`.data_parallel` (3.7, on a real process
group: :mod:`synclab.pinned_transfers.ranks`), :mod:`.ngram` (3.8), :mod:`.clauses` (the clause table of 3.1-3.8), and :mod:`.common` (what they
share: running a call under count_syncs, the WSL case, the hints).
"""

from synclab.pinned_transfers.checks.clauses import CLAUSES
from synclab.pinned_transfers.checks.data_parallel import CHECKS_3_7, check_dp_sync, dp_sync_counts
from synclab.pinned_transfers.checks.ngram import (CHECKS_3_8, check_bad_words, check_ngram_and_bad_words,
                                                   check_ngram_update)
from synclab.pinned_transfers.checks.penalties import CHECKS_3_5, check_bincount, run_bincount
from synclab.pinned_transfers.checks.snippets import SNIPPETS, check_sync_predictions
from synclab.pinned_transfers.checks.uploads import (CHECKS_3_1, CHECKS_3_2, CHECKS_3_3, CHECKS_3_4,
                                                     check_async_tensor_h2d, check_fast_prefill,
                                                     check_gather_specific_token_logprobs, check_init_model_kwargs)

__all__ = ["CLAUSES", "CHECKS_3_1", "CHECKS_3_2", "CHECKS_3_3", "CHECKS_3_4", "CHECKS_3_5", "CHECKS_3_7", "CHECKS_3_8", "SNIPPETS",
           "check_async_tensor_h2d", "check_bad_words", "check_bincount", "check_dp_sync", "check_fast_prefill",
           "check_gather_specific_token_logprobs", "check_init_model_kwargs", "check_ngram_and_bad_words",
           "check_ngram_update", "check_sync_predictions", "dp_sync_counts", "run_bincount"]
