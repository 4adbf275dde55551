"""Chapter 3, Exercise 3.5: the penalties' ``bincount``, zeroing and counting on the device, and its checks.

The reader writes all of it: zero the new requests' rows with ``index_fill_``, flag
their prompt tokens, count their output tokens with one scatter over the flattened
``[slots, vocab]`` tables. The baseline (``engine/penalties.py``) zeroes with
``x[idx] = 0``, one blocking upload per table.
"""

from __future__ import annotations

import random
from typing import Any, Callable

import torch

from synclab.checks import Check, CheckFailed, CheckReport, around_first_difference, expect, run_checks, found_right
from synclab.answer_keys import answer_key
from synclab.answer_keys.runners import runs_with_the_answer
from synclab.device import to_device
from synclab.pinned_transfers.checks.common import counted, expect_no_syncs, report_data
from synclab.pinned_transfers.workloads import device_state, penalty_state

BincountFunction = Callable[..., None]

ZEROING_HINT = "x[idx].zero_() zeroes a copy: x[idx] gathers the rows into a new tensor; use index_fill_(0, idx, 0)"
COUNTING_HINT = ("count over positions prompt_len <= j < prefill_len only, into row*vocab + token of the flattened "
                 "table (scatter_add_ of ones)")
FLAG_HINT = ("a prompt token is flagged 1 however often it occurs: scatter_reduce_ 'amax' (a flag is the max), or "
             "scatter_ of 1s at the prompt positions only (a plain scatter_ of every position lets a later 0 win); "
             "not a sum")


@runs_with_the_answer
def run_bincount(impl: BincountFunction, state: dict[str, Any], slots: list[int]) -> dict[str, Any]:
    """Call ``impl`` on device copies of ``state`` (plain lists) for the new requests in ``slots``: both tables after
    the call, as lists, and its syncs (:func:`report_data`). A runner (:mod:`synclab.answer_keys.runners`): in the
    grader it runs where the answer is."""
    dev = device_state(state)
    idx_mapping = to_device(torch.tensor(slots, dtype=torch.int32))  # [n] device
    max_prefill_len = max((state["prefill_len"][s] for s in slots), default=0)  # a host int, as in vLLM
    _, report = counted(lambda: impl(idx_mapping, dev["all_token_ids"], dev["prompt_len"], dev["prefill_len"],
                                     dev["prompt_bin_mask"], dev["output_bin_counts"], max_prefill_len))
    return {"prompt_bin_mask": dev["prompt_bin_mask"].cpu().tolist(),
            "output_bin_counts": dev["output_bin_counts"].cpu().tolist(), "syncs": report_data(report)}


TABLES = ("prompt_bin_mask", "output_bin_counts")
MIXUP = "rows mixed up by batch position and slot:"  # how a slot/position hint begins


def _rebuilt_row(state: dict[str, Any], table: str, tokens_of: int, lens_of: int, limit: int) -> list[int]:
    """A freshly rebuilt row of ``table`` from slot ``tokens_of``'s tokens and slot ``lens_of``'s lengths.

    Positions past ``limit`` (the call's ``max_prefill_len``) are not read, as in the reader's code;
    ids outside the vocabulary are skipped (#49081's guard).
    """
    vocab = len(state[table][0])
    row = [0] * vocab
    tokens = state["all_token_ids"][tokens_of]
    prompt = state["prompt_len"][lens_of]
    for j in range(min(state["prefill_len"][lens_of], limit, len(tokens))):
        token = tokens[j]
        if not 0 <= token < vocab:
            continue
        if j < prompt and table == "prompt_bin_mask":
            row[token] = 1
        elif j >= prompt and table == "output_bin_counts":
            row[token] += 1
    return row


def _on_top(table: str, base: list[int], written: list[int]) -> list[int]:
    """``written`` scattered into a row that held ``base``: flags keep the max, counts add up."""
    if table == "prompt_bin_mask":
        return [max(b, w) for b, w in zip(base, written)]
    return [b + w for b, w in zip(base, written)]


def _not_zeroed(state: dict[str, Any], table: str, slot: int, got: list[int], want: list[int]) -> bool:
    """The row kept the previous occupant's values, and the new ones went on top (or nothing was written)."""
    stale = state[table][slot]
    return got != want and got in (_on_top(table, stale, want), stale)


def _slot_mixups(state: dict[str, Any], slots: list[int], limit: int) -> list[tuple[dict[str, list[list[int]]], str]]:
    """Both tables as they come out when the request at batch position i is taken for slot i, with how.

    The rows of ``slots`` are zeroed (index_fill_ with idx, as taught); then the request at batch
    position i reads its tokens and/or lengths at row i instead of row ``slots[i]``, or is scattered
    into row i.
    """
    out = []
    read_parts = [(True, True, "its tokens and lengths"), (True, False, "its tokens"), (False, True, "its lengths")]
    for read_tokens, read_lens, read_what in read_parts + [(False, False, "")]:
        for write_at_position in (False, True):
            if not (read_tokens or read_lens or write_at_position):
                continue  # that is the right way
            tables = {t: [list(row) for row in state[t]] for t in TABLES}
            for t in TABLES:
                for s in slots:
                    tables[t][s] = [0] * len(tables[t][s])
            for i, s in enumerate(slots):
                target = i if write_at_position else s
                for t in TABLES:
                    row = _rebuilt_row(state, t, i if read_tokens else s, i if read_lens else s, limit)
                    tables[t][target] = _on_top(t, tables[t][target], row)
            how = " and ".join(part for part in (f"read {read_what} at row i" if read_what else "",
                                                 "was scattered into row i" if write_at_position else "") if part)
            out.append((tables, how))
    return out


def _slot_mixup(state: dict[str, Any], got: dict[str, list[list[int]]], slots: list[int], limit: int) -> str:
    """The hint when both tables are exactly what a batch-position/slot mix-up gives; else ""."""
    if not any(s != i for i, s in enumerate(slots)):
        return ""  # slots 0..n-1: position and slot agree, nothing to tell apart
    for tables, how in _slot_mixups(state, slots, limit):
        if tables == got:
            return (f"{MIXUP} the request at batch position i (slot "
                    f"idx_mapping[i]) {how}. Index by the request's slot, idx = idx_mapping[i], not by its batch "
                    "position i (torch.arange(n), [:n]): read all_token_ids, prompt_len and prefill_len at rows "
                    "idx, and scatter into rows idx of the tables (idx * vocab + token)")
    return ""


def _overwritten_flags(state: dict[str, Any], slot: int, got: list[int], want: list[int], limit: int) -> str:
    """Flags a later 0 overwrote (scatter_ instead of a max), if that is all that went wrong; else ""."""
    if any(g > w for g, w in zip(got, want)):
        return ""
    lost = [t for t, (g, w) in enumerate(zip(got, want)) if w and not g]
    tokens, prompt = state["all_token_ids"][slot], state["prompt_len"][slot]
    later = {t: next((j for j in range(prompt, min(limit, len(tokens))) if tokens[j] == t), None) for t in lost}
    if not lost or any(j is None for j in later.values()):
        return ""
    t, j = lost[0], later[lost[0]]
    return (f"token {t} is in the prompt, and occurs again at position {j}, past the prompt: that later position "
            "wrote a 0 over the flag. scatter_ writes every position's value and the last write wins; use "
            "scatter_reduce_(..., reduce='amax') (a flag is the max), or scatter only the prompt positions")


def _row_hint(state: dict[str, Any], slot: int, table: str, got: list[int], want: list[int], slots: list[int],
              limit: int, unzeroed: set[str]) -> str:
    """Name the likely fault from how a row differs (``unzeroed``: the tables whose new rows kept stale values)."""
    if slot not in slots:
        return "only the new requests' rows may change"
    if table == "prompt_bin_mask":
        overwritten = _overwritten_flags(state, slot, got, want, limit)
        if overwritten:
            return overwritten
    if _not_zeroed(state, table, slot, got, want):
        if unzeroed == {table}:
            other = next(t for t in TABLES if t != table)
            return (f"{table} was not zeroed ({other} was): its row still holds the previous occupant's values, "
                    f"the new ones added on top. Zero both tables' rows: {table}.index_fill_(0, idx, 0) too "
                    "(the scatter only ever adds)")
        return "the row still holds the previous occupant's values: " + ZEROING_HINT
    if table == "prompt_bin_mask":
        return FLAG_HINT if max(got, default=0) > 1 else "flag tokens at positions j < prompt_len"
    return COUNTING_HINT


def _same_tables(impl: BincountFunction, state: dict[str, Any], slots: list[int], case: str) -> dict[str, Any]:
    """Both tables after the reader's call, compared with the reference's; the call's syncs, as data."""
    outcome = run_bincount(impl, state, slots)
    want = dict(zip(TABLES, _bincount_reference(slots, **state)))
    got = {table: outcome[table] for table in TABLES}
    report = outcome["syncs"]
    if got == want:
        found_right(want)  # both tables, found equal to the reference's
        return report
    limit = max((state["prefill_len"][s] for s in slots), default=0)
    unzeroed = {t for t in TABLES if any(got[t][s] != want[t][s] for s in slots)
                and all(got[t][s] == want[t][s] or _not_zeroed(state, t, s, got[t][s], want[t][s]) for s in slots)}
    mixup = _slot_mixup(state, got, slots, limit)
    for table in TABLES:
        for s, (got_row, expected) in enumerate(zip(got[table], want[table])):
            if got_row != expected:
                kind = "new request" if s in slots else "untouched"
                want_text, got_text = around_first_difference(expected, got_row)
                expect(False, f"{table} row {s} ({kind}) differs (index = token id)", expected=want_text,
                       got=got_text, hint=mixup or _row_hint(state, s, table, got_row, expected, slots, limit, unzeroed),
                       case=case)
    return report


def _check_bincount_fixed(impl: BincountFunction, rng: random.Random) -> None:
    state = {"all_token_ids": [[1, 1, 2, 3], [0, 4, 4, 4], [5, 5, 5, 5], [2, 0, 1, 3]],
             "prompt_len": [2, 1, 4, 0], "prefill_len": [4, 4, 4, 2],
             "prompt_bin_mask": [[1] * 6 for _ in range(4)], "output_bin_counts": [[7] * 6 for _ in range(4)]}
    _same_tables(impl, state, [1, 3], "slots 1 and 3 taken by new requests; stale 1s and 7s everywhere")


def _check_bincount_repeats(impl: BincountFunction, rng: random.Random) -> None:
    state = {"all_token_ids": [[3, 3, 3, 1, 1, 0], [2, 2, 2, 2, 2, 2]], "prompt_len": [3, 1], "prefill_len": [5, 6],
             "prompt_bin_mask": [[0] * 5] * 2, "output_bin_counts": [[0] * 5] * 2}
    _same_tables(impl, state, [0, 1], "slot 0: prompt 3 3 3, outputs 1 1, then a stale 0 (slot 1 reads 6 positions)")


def _check_bincount_untouched(impl: BincountFunction, rng: random.Random) -> None:
    state = penalty_state(rng, 6, 12, 5)
    state["prompt_len"][4], state["prefill_len"][4] = 2, 5  # the new request has tokens: a write elsewhere shows
    _same_tables(impl, state, [4], "one new request in slot 4 of 6, with 2 prompt and 3 output tokens")
    _same_tables(impl, penalty_state(rng, 3, 8, 4), [], "no new request")


def _check_bincount_random(impl: BincountFunction, rng: random.Random) -> None:
    for trial in range(10):
        slots_total, vocab = rng.randint(1, 16), rng.choice([4, 50, 300])
        state = penalty_state(rng, slots_total, vocab, rng.randint(1, 20))
        slots = rng.sample(range(slots_total), rng.randint(0, slots_total))
        _same_tables(impl, state, slots, f"random trial {trial}: {len(slots)} of {slots_total} slots, vocab {vocab}")


GUARD_HINT = ("a token id of vocab_size or more has no column: slot * vocab + token then lands in the NEXT slot's row "
              "(or past the table). Mask such positions out (0 <= token < vocab_size), as vLLM #49081 adds to the "
              "kernel, and keep the scatter index in range (clamp the token) so the masked positions write nothing")


def _check_bincount_out_of_range(impl: BincountFunction, rng: random.Random) -> None:
    vocab = 8  # the cases of vLLM's tests/v1/sample/test_penalty_bincount_oob.py (#49081), at a vocabulary of 8
    cases = [([[5, 8], [0, 0]], [2, 0], [2, 0], "a prompt token id equal to vocab_size (8), slot 0 of 2"),
             ([[3, 8], [0, 0]], [1, 0], [2, 0], "an output token id equal to vocab_size (8), slot 0 of 2"),
             ([[7, 0], [0, 0]], [1, 0], [1, 0], "the largest valid id, vocab_size - 1"),
             ([[0, 0], [2, 9]], [0, 1], [0, 2], "an output token id past vocab_size in the LAST slot")]
    for tokens, prompt_len, prefill_len, case in cases:
        slot = 0 if prefill_len[0] else 1
        state = {"all_token_ids": tokens, "prompt_len": prompt_len, "prefill_len": prefill_len,
                 "prompt_bin_mask": [[0] * vocab, [0] * vocab], "output_bin_counts": [[0] * vocab, [0] * vocab]}
        try:
            _same_tables(impl, state, [slot], case)
        except CheckFailed as failed:  # the guard, unless the rows were mixed up (a fault of its own)
            raise CheckFailed(failed.message, expected=failed.expected, got=failed.got, case=case,
                              hint=failed.hint if failed.hint.startswith(MIXUP) else GUARD_HINT) from None
        except NotImplementedError:
            raise  # a stub (NotImplementedError is a RuntimeError): "not implemented", as every other check says
        except (RuntimeError, IndexError) as exc:
            raise CheckFailed("the update raised", expected="the tables updated, the out-of-range id ignored",
                              got=f"{type(exc).__name__}: {str(exc)[:90]}", case=case, hint=GUARD_HINT) from None


def _check_bincount_syncs(impl: BincountFunction, rng: random.Random) -> None:
    state = penalty_state(rng, 16, 300, 20)
    report = _same_tables(impl, state, list(range(0, 16, 2)), "8 new requests in 16 slots")
    expect_no_syncs(report, "bincount", "x[idx] = 0 copies the 0 from host memory, blocking: index_fill_(0, idx, 0) "
                    "passes it to the kernel; torch.bincount reads its input's min and max back to size its output: "
                    "scatter into the flattened table instead", "8 new requests")


CHECKS_3_5 = [
    Check("3.5", "fixed case: the new requests' rows are really zeroed, then recounted",
          _check_bincount_fixed, random=False, id="fixed-case"),
    Check("3.5", "a repeated prompt token is flagged once; tokens past prefill_len are not counted",
          _check_bincount_repeats, random=False, id="prompt-flags"),
    Check("3.5", "other rows untouched; no new request changes nothing", _check_bincount_untouched, id="other-rows"),
    Check("3.5", "same as a plain reference on random states", _check_bincount_random, id="random-states"),
    Check("3.5", "a token id of vocab_size or more is ignored, not written into another row",
          _check_bincount_out_of_range, random=False, id="out-of-vocab"),
    Check("3.5", "0 syncs", _check_bincount_syncs, id="no-syncs"),
]


def check_bincount(impl: BincountFunction, seed: int | None = None) -> CheckReport:
    """Exercise 3.5: run every check against the reader's ``bincount``."""
    return run_checks("Exercise 3.5 — bincount (zero, flag, count)", CHECKS_3_5, impl, seed=seed)


@answer_key("3.5")
def _bincount_reference(slots: list[int], all_token_ids: list[list[int]], prompt_len: list[int],
                       prefill_len: list[int], prompt_bin_mask: list[list[int]],
                       output_bin_counts: list[list[int]]) -> tuple[list[list[int]], list[list[int]]]:
    """The two tables after the update, as lists: rebuilt rows for ``slots``, the other rows unchanged."""
    mask = [list(row) for row in prompt_bin_mask]
    counts = [list(row) for row in output_bin_counts]
    for s in slots:
        mask[s] = [0] * len(mask[s])
        counts[s] = [0] * len(counts[s])
        for j in range(prefill_len[s]):
            token = all_token_ids[s][j]
            if not 0 <= token < len(counts[s]):
                continue  # #49081's guard: an id outside the vocabulary has no column
            if j < prompt_len[s]:
                mask[s][token] = 1
            else:
                counts[s][token] += 1
    return mask, counts
