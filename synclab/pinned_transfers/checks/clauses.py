"""Chapter 3's clause table: each clause of 3.1-3.8's contracts (the page's "The lab", the lab's exercise), the check
and fixed case that exercise it, the honest mistake that breaks it (``tests/honest/wrong/<wrong>.py``) and the words
its failure holds. ``tests/test_clauses.py`` holds every clause to them."""

from __future__ import annotations

from synclab.checks import Clause
from synclab.pinned_transfers.checks.data_parallel import CHECKS_3_7
from synclab.pinned_transfers.checks.ngram import CHECKS_3_8
from synclab.pinned_transfers.checks.penalties import CHECKS_3_5
from synclab.pinned_transfers.checks.uploads import CHECKS_3_1, CHECKS_3_2, CHECKS_3_3, CHECKS_3_4


def _named(checks: list, start: str) -> str:
    """The full name of the one check of ``checks`` whose name starts with ``start``."""
    (name,) = [c.name for c in checks if c.name.startswith(start)]
    return name


_ZERO_3_1, _WSL_3_1 = _named(CHECKS_3_1, "0 syncs"), _named(CHECKS_3_1, "WSL")
_WSL_3_2, _WSL_3_3 = _named(CHECKS_3_2, "WSL"), _named(CHECKS_3_3, "WSL")
_ZERO_3_3, _ZERO_3_4 = _named(CHECKS_3_3, "0 syncs"), _named(CHECKS_3_4, "0 syncs")
_ONE_READ = _named(CHECKS_3_7, "_synchronize_dp_ranks: exactly 1 sync")
_NGRAM_RANDOM, _NGRAM_SYNCS = _named(CHECKS_3_8, "n-gram state, 10 random"), _named(CHECKS_3_8, "n-gram state: 0")

CLAUSES = [
    Clause("3.1-no-staging", "With pinned memory the host never waits, not even for a staging copy", _ZERO_3_1,
           "list of ints", "3.1-to-device-without-pinning", "build the host tensor in pinned memory",
           lab="no device wait, and no staging copy either"),
    Clause("3.1-no-wait", "With pinned memory the host never waits", _ZERO_3_1, "list of ints",
           "3.1-synchronize-to-be-safe", "Remove it", also=(_WSL_3_1,),
           lab="The host does not wait, on a machine with pinned memory"),
    Clause("3.1-caller-data", "the caller may change its data as soon as the call returns",
           _named(CHECKS_3_1, "no pinned buffer refilled"), "3 uploads of 6 ints each, back to back",
           "3.1-reused-staging-buffer", "stage each call's data in a new pinned tensor",
           lab="A caller may reuse its list, array or pageable tensor as soon as the call returns"),
    Clause("3.1-transposed", "a transposed one", _named(CHECKS_3_1, "same values"), "transposed CPU tensor",
           "3.1-flat-view-copy", "is not contiguous", also=(_ZERO_3_1, _WSL_3_1), lab="a non-contiguous one too"),
    Clause("3.1-wsl", "on WSL, with no pinned memory: the same values arrive", _WSL_3_1, "list of ints",
           "3.1-hard-coded-pin-true", "never a hard-coded True", lab="The helper must still work"),
    Clause("3.2-zero-syncs", "Zero syncs whatever the batch size", _named(CHECKS_3_2, "0 syncs"),
           "64 requests, all with ids", "3.2-sampled-read-back", "fill column 0 on the device", also=(_WSL_3_2,),
           lab="zero syncs, whatever the batch size"),
    Clause("3.2-uploads", "as many uploads for 64 requests as for 1", _named(CHECKS_3_2, "as many uploads"),
           "1 request, then 64, all with ids", "3.2-an-upload-per-request", "an upload per request",
           lab="as many\nuploads for 64 requests as for 1"),
    Clause("3.2-buffers", "no host buffer changed while an upload still needs it",
           _named(CHECKS_3_2, "no pinned buffer written"), "8 requests then 3 requests then 8 requests",
           "3.2-buffer-cached-on-self", "build the id matrix and the mask in new pinned tensors on every call",
           lab="A host buffer handed to a non_blocking upload must not change until the upload ran"),
    Clause("3.3-boundary", "0 before each request's boundary, 1 from it on", _named(CHECKS_3_3, "fixed case"),
           "boundary 2 of 5, none, 0 of 4, 3 of 3", "3.3-boundary-off-by-one", "arange(seq_len) >= boundary",
           also=(_named(CHECKS_3_3, "a batch that shrank"), _named(CHECKS_3_3, "same as a plain"), _ZERO_3_3,
                 _WSL_3_3),
           lab="0 before it and 1 from it on"),
    Clause("3.3-zero-syncs", "Zero syncs whatever the batch size", _ZERO_3_3, "64 requests", "3.3-device-seq-lens",
           "take the lengths from self.optimistic_seq_lens_cpu", also=(_WSL_3_3,),
           lab="zero syncs, whatever the batch size"),
    Clause("3.4-tail", "every entry after them is set to the last valid index", _named(CHECKS_3_4, "fixed cases"),
           "3 indices, padded to 4", "3.4-pads-only-to-graph-size", "fill buf[num_logits:], the whole tail",
           also=(_named(CHECKS_3_4, "same as a plain"), _ZERO_3_4),
           lab="the last index in every entry after them"),
    Clause("3.4-zero-syncs", "each with zero syncs", _ZERO_3_4, "3 indices", "3.4-item-fill",
           "assign the 0-d device tensor", lab="zero syncs"),
    Clause("3.5-vocab", "ignoring ids outside [0, vocab_size)", _named(CHECKS_3_5, "a token id of vocab_size"),
           "a prompt token id equal to vocab_size", "3.5-no-vocab-guard", "Mask such positions out",
           lab="the ids outside [0, vocab_size)"),
    Clause("3.5-zero-syncs", "each with zero syncs", _named(CHECKS_3_5, "0 syncs"), "8 new requests",
           "3.5-mask-assign-zero", "index_fill_(0, idx, 0)", lab="x[idx] = 0 copies a host 0 to the device"),
    Clause("3.6-kinds", "Predict what count_syncs reports", "predicted syncs match count_syncs",
           "the 10 snippets, each counted", "3.6-pageable-upload-is-async", "a NumPy array lives in pageable memory",
           lab="predict what count_syncs reports on a GPU machine with pinned memory"),
    Clause("3.7-one-upload", "uploads it once", _named(CHECKS_3_7, "_run_ar: 0 syncs"),
           "both ranks micro-batch, CUDA graphs on both, rank 0", "3.7-device-table-field-writes",
           "write the fields into a host tensor", also=(_ONE_READ, _named(CHECKS_3_7, "WSL")),
           lab="upload it with one non_blocking copy"),
    Clause("3.7-one-read", "with one sync, the read back", _ONE_READ,
           "both ranks micro-batch, CUDA graphs on both, rank 0", "3.7-readers-on-device",
           "read the reduced table back once", lab="read the reduced table back once"),
    Clause("3.7-cpu-group", "the table stays on the host", _named(CHECKS_3_7, "CPU group"),
           "host tensors over the CPU group", "3.7-dp-device-on-the-cpu-group", "_get_device_and_group",
           lab="the same code must then work with host tensors"),
    Clause("3.8-moved-rows", "on the device (its newest tokens exist only there)",
           _named(CHECKS_3_8, "n-gram state, scripted"), "a and b swap rows", "3.8-rows-moved-one-by-one",
           "a move wrote over a row before that row's own move read it", also=(_NGRAM_RANDOM, _NGRAM_SYNCS)),
    Clause("3.8-bad-words-fill", "Through a one-element slice the shapes differ",
           _named(CHECKS_3_8, "bad words: 0 syncs"), "16 requests", "3.8-logits-element-assign",
           "logits[token:token + 1] = -inf"),
    Clause("3.2-none", "None when no request asked", _named(CHECKS_3_2, "no requested ids"),
           "4 requests, logprob_token_ids {}", "3.2-no-none-case", "return None before building anything",
           also=(_named(CHECKS_3_2, "same as a plain"),)),  # a random batch of one request may ask for none
    Clause("3.3-nothing", "{} when there is nothing to pass", _named(CHECKS_3_3, "nothing to pass"),
           "no request carries token types", "3.3-types-for-every-batch", "return {}: there is nothing to pass",
           also=(_named(CHECKS_3_3, "same as a plain"),),
           lab="{} when the model is not a pooling model or no request carries a boundary"),
    Clause("3.4-loudly", "A step with no logits index is a bug upstream: fail loudly",
           _named(CHECKS_3_4, "no logits indices"), "empty logits_indices", "3.4-empty-step-returns-empty",
           "fail loudly", lab="n == 0 is a bug upstream: fail loudly"),
]
