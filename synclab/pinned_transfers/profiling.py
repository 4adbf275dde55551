"""Chapter 3's profiles: syncs per call before and after, time per call, host-to-device bandwidth, a stale read."""

from __future__ import annotations

import random
from typing import Any, Callable

import torch

from synclab.checks import finished, unfinished
from synclab.claims import Faster, Within, declare, validated
from synclab.device import pick_device, to_device
from synclab.sim.pinning import simulated_pinning
from synclab.pinned_transfers.checks.common import counted
from synclab.pinned_transfers.checks.data_parallel import dp_sync_counts
from synclab.pinned_transfers.checks.ngram import count_bad_words, count_reorder_step
from synclab.pinned_transfers.workloads import (SamplerClass, device_state, logprob_case, penalty_state, runner_for,
                                               token_type_case)

BATCH_SIZES = (1, 4, 16, 64, 256)
PROFILE_VOCAB = 4096
BANDWIDTH_SIZES = tuple(4 * 1024 * 4**k for k in range(9))  # 4 KiB to 256 MiB
COPY_VARIANTS = ("pageable, blocking", "pageable, non_blocking", "pinned, blocking", "pinned, non_blocking")


def component_calls(impls: dict[str, Any], num_reqs: int, rng: random.Random) -> dict[str, Callable[[], Any]]:
    """One zero-argument call per component for a batch of ``num_reqs`` requests (build it inside simulated_pinning).

    ``impls`` holds the implementations under the keys ``"async_tensor_h2d"``,
    ``"sampler"``, ``"runner"`` (3.3 and 3.4) and ``"bincount"``.
    """
    device = pick_device()
    ids = list(range(num_reqs))
    sampler = impls["sampler"]()
    logits, token_ids, sampled = logprob_case(rng, num_reqs, PROFILE_VOCAB, share_with_ids=1.0)
    params, lens = token_type_case(rng, num_reqs, share_with_types=1.0)
    runner = runner_for(impls["runner"], params, lens)
    logits_indices = to_device(torch.arange(num_reqs, dtype=torch.int32))  # [num_reqs] device
    dev = device_state(penalty_state(rng, num_reqs, 64, 8))
    slots = to_device(torch.tensor(ids, dtype=torch.int32))
    bincount = impls["bincount"]
    return {
        "async_tensor_h2d": lambda: impls["async_tensor_h2d"](ids, device, torch.int32),
        "gather_specific_token_logprobs": lambda: sampler.gather_specific_token_logprobs(logits, token_ids, sampled),
        "_init_model_kwargs": runner._init_model_kwargs,
        "_prepare_kv_sharing_fast_prefill": lambda: runner._prepare_kv_sharing_fast_prefill(logits_indices),
        "bincount": lambda: bincount(slots, dev["all_token_ids"], dev["prompt_len"], dev["prefill_len"],
                                     dev["prompt_bin_mask"], dev["output_bin_counts"], 8),
    }


# The exercises that write each "after" implementation (one class may hold two), and the rows each one fills.
IMPL_TASKS = {"async_tensor_h2d": ("3.1",), "sampler": ("3.2",), "runner": ("3.3", "3.4"), "bincount": ("3.5",),
              "ngram": ("3.8",), "bad_words": ("3.8",), "run_ar": ("3.7",), "synchronize_dp_ranks": ("3.7",)}
ROW_TASKS = {"async_tensor_h2d": "3.1", "gather_specific_token_logprobs": "3.2", "_init_model_kwargs": "3.3",
             "_prepare_kv_sharing_fast_prefill": "3.4", "bincount": "3.5",
             "update_ngram_gpu_tensors_incremental": "3.8", "apply_bad_words": "3.8",
             "_synchronize_dp_ranks (rank 0 of 2)": "3.7"}


def _with_baseline_methods(runner_cls: type, baseline_cls: type, unfinished_tasks: set[str]) -> type:
    """The reader's runner, with the baseline's method for each of its exercises not finished yet (a skipped stretch).

    The runner's methods are rows of the profile (:data:`ROW_TASKS`: ``_init_model_kwargs`` is 3.3's).
    """
    swapped = {name: getattr(baseline_cls, name) for name, task in ROW_TASKS.items()
               if task in unfinished_tasks and hasattr(baseline_cls, name)}
    return type(runner_cls.__name__, (runner_cls,), swapped) if swapped else runner_cls


def sync_counts(before: dict[str, Any], after: dict[str, Any],
                batch_sizes: tuple[int, ...] = BATCH_SIZES) -> dict[str, dict[str, list[int]]]:
    """Syncs per call of each site, before and after PR #41429, at each batch size (counted: any machine).

    Besides :func:`component_calls`' keys, ``before``/``after`` may hold ``"ngram"`` (3.8's update: one
    step in which every request moves), ``"bad_words"`` (3.8: every request bans a token) and
    ``"run_ar"`` with ``"synchronize_dp_ranks"`` (3.7: counted on rank 0 of two; no batch size).
    A site whose exercise has not passed its checks yet is left out, with one line that names it.
    """
    from synclab.reference import record

    left_out = {task: reason for task in sorted(dict.fromkeys(ROW_TASKS.values())) if (reason := unfinished(task))}
    for reason in left_out.values():
        print(f"left out: {reason}.")
    # the runner holds 3.3 and 3.4: each unfinished one runs the baseline's method, and its row is dropped
    if "runner" in after and "runner" in before:
        after = {**after, "runner": _with_baseline_methods(after["runner"], before["runner"], set(left_out))}
    # any other implementation with an unfinished exercise runs its baseline on both sides, and its rows are dropped
    stubbed = {key for key in after if set(IMPL_TASKS.get(key, ())) & set(left_out)} - {"runner"}
    dropped = set(left_out).union(*(IMPL_TASKS[key] for key in stubbed))
    after = {key: before[key] if key in stubbed else impl for key, impl in after.items()}
    counts: dict[str, dict[str, list[int]]] = {}

    def add(site: str, label: str, value: int) -> None:
        counts.setdefault(site, {"before": [], "after": []})[label].append(value)

    for label, impls in (("before", before), ("after", after)):
        for n in batch_sizes:
            with simulated_pinning(True):
                for component, call in component_calls(impls, n, random.Random(n)).items():
                    add(component, label, counted(call)[1].count)
                if "ngram" in impls:
                    add("update_ngram_gpu_tensors_incremental", label,
                        count_reorder_step(impls["ngram"], n, random.Random(n)))
                if "bad_words" in impls:
                    add("apply_bad_words", label, count_bad_words(impls["bad_words"], n))
    if "run_ar" in before and "run_ar" in after and "3.7" not in dropped:
        dp = dp_sync_counts(after["run_ar"], after["synchronize_dp_ranks"],
                            (before["run_ar"], before["synchronize_dp_ranks"]))
        for label in ("before", "after"):
            counts.setdefault("_synchronize_dp_ranks (rank 0 of 2)", {})[label] = \
                [dp["_synchronize_dp_ranks"][label]] * len(batch_sizes)
    counts = {row: c for row, c in counts.items() if ROW_TASKS.get(row) not in dropped}
    record("ch3", "sync_counts", {"batch_sizes": list(batch_sizes), "counts": counts})
    return counts


def per_step(counts: dict[str, dict[str, list[int]]]) -> dict[str, dict[str, list[int]]]:
    """The counts with a last row: one step that calls every site once (``async_tensor_h2d`` is a helper, left out).

    Where a stretch is not written its site is not in ``counts``, and the row says it sums the sites written."""
    sites = {name: c for name, c in counts.items() if name != "async_tensor_h2d"}
    if not sites:
        return {}
    total = {label: [sum(c[label][i] for c in sites.values()) for i in range(len(next(iter(sites.values()))[label]))]
             for label in ("before", "after")}
    every = set(ROW_TASKS) - {"async_tensor_h2d"} <= set(sites)
    return {**sites, "one step, every site" if every else "one step, the sites written": total}


def sync_table(counts: dict[str, dict[str, list[int]]], batch_sizes: tuple[int, ...] = BATCH_SIZES) -> str:
    """The counts as text: one row per component, ``before -> after`` per batch size."""
    rows = [f"{'syncs per call, before -> after':<40}" + "".join(f"{f'{n} req.':>12}" for n in batch_sizes)]
    for component, c in counts.items():
        rows.append(f"{component:<40}" + "".join(f"{f'{b} -> {a}':>12}" for b, a in zip(c["before"], c["after"])))
    return "\n".join(rows)


declare("ch3.gather_sweep",
        cpu=("On a CPU the two lines agree within 25% at every batch size.", [Within(a=0, b=1, factor=1.25)]),
        gpu=("On a GPU the new version is at least 1.1× faster than the old one from 16 requests up.",
             [Faster(fast=1, slow=0, by=1.1, from_value=16)]),
        cpu_shows="a CPU has no device to wait for and no link to copy over: an upload is a copy within host "
                  "memory, so the two versions differ only in host work, and the book's two do about the same. A gap "
                  "comes from this machine's noise, or from a version of yours that does less host work (one "
                  "torch.tensor of the padded rows rather than a fill per row) or more. A CPU cannot show what #41429 "
                  "saves, the wait for the device at each per-request upload: the sync counts above carry over to a "
                  "GPU, these times do not.")


def gather_sweep(before: SamplerClass, after: SamplerClass, batch_sizes: tuple[int, ...] = BATCH_SIZES) -> Any:
    """Median time of ``gather_specific_token_logprobs`` per batch size, before and after, on this device."""
    from synclab.reference import record
    from synclab.timing import run_time, sweep

    def factory(sampler_cls: SamplerClass) -> Callable[[int], Callable[[], Any]]:
        def build(n: int) -> Callable[[], Any]:
            sampler = sampler_cls()
            logits, ids, sampled = logprob_case(random.Random(n), n, PROFILE_VOCAB, share_with_ids=1.0)
            return lambda: sampler.gather_specific_token_logprobs(logits, ids, sampled)

        return build

    variants = finished({"before #41429": factory(before), "after (3.2)": factory(after)})
    result = validated("ch3.gather_sweep", lambda: sweep(variants, "requests", batch_sizes,
                                                         min_run_time=run_time(0.1, 0.5), reference="before #41429"))
    record("ch3", "gather_sweep", result.to_dict())
    return result


def profile_gather(before: SamplerClass, after: SamplerClass, num_reqs: int = 64) -> dict[str, Any]:
    """One profiled call of each sampler on the same batch, ready for ``timeline_figure``: on a machine with pinned
    memory, as the checks play it (on a CPU without it, the sampler's ``pin_memory`` flag, read when it is built,
    would be False, and the "after" row would show two staging copies that a GPU machine does not make)."""
    from synclab.profiling import profile

    traces = {}
    for name, sampler_cls in finished({"before #41429": before, "after (3.2)": after}).items():
        logits, ids, sampled = logprob_case(random.Random(num_reqs), num_reqs, PROFILE_VOCAB, share_with_ids=1.0)
        with simulated_pinning(True):
            traces[name] = profile(sampler_cls().gather_specific_token_logprobs, logits, ids, sampled, warmup=2)
    return traces


def _arrived_intact(copy: torch.Tensor) -> None:
    if not bool((copy == 7).all()):
        raise AssertionError("the uploaded bytes differ from the source: refusing to time it")


def bandwidth_sweep(sizes: tuple[int, ...] = BANDWIDTH_SIZES) -> dict[str, Any] | None:
    """Host-to-device copies from pageable and pinned memory, blocking and not: GB/s and host time. GPU only.

    For each size and variant: the bandwidth (bytes / median time of copy + synchronise, timed
    by ``benchmark``: wall clock around blocks synchronised before and after) and the time the host spends inside the ``.to()``
    call alone (``perf_counter``, the device drained before each call). Returns None
    without a GPU: there is no host-to-device link to measure.
    """
    import time

    from synclab.device import has_cuda
    from synclab.provenance import Provenance
    from synclab.reference import record
    from synclab.timing import Progress, benchmark

    if not has_cuda():
        return None
    result: dict[str, Any] = {"sizes": list(sizes), "gbps": {}, "host_us": {}, "provenance": Provenance.here().to_dict()}
    bar = Progress(len(sizes) * len(COPY_VARIANTS), "host-to-device copies")
    for variant in COPY_VARIANTS:
        pinned, non_blocking = variant.startswith("pinned"), variant.endswith("non_blocking")
        result["gbps"][variant], result["host_us"][variant] = [], []
        for size in sizes:
            src = torch.empty(size, dtype=torch.uint8, pin_memory=pinned).fill_(7)
            timing = benchmark(lambda: src.to("cuda", non_blocking=non_blocking), label=f"{variant} {size} B",
                               check=_arrived_intact, min_run_time=0.2)
            host = []
            for _ in range(20):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                src.to("cuda", non_blocking=non_blocking)
                host.append((time.perf_counter() - t0) * 1e6)
            torch.cuda.synchronize()
            result["gbps"][variant].append(size / (timing.median_us * 1e-6) / 1e9)
            result["host_us"][variant].append(sorted(host)[len(host) // 2])
            bar.step(f"{variant}, {size} B")
    bar.close()
    record("ch3", "bandwidth", result)
    return result


def stale_read_text(result: dict[str, Any]) -> str:
    """:func:`stale_read`'s counts in words: a learner met the bare dict and had to guess what it said."""
    where = "on the GPU" if result["device"] == "cuda" else "on the simulated device (a model of the ordering)"
    return (f"{where}: of {result['num_elements']:,} elements copied with non_blocking=True, "
            f"{result['wrong_before_wait']:,} were wrong when read at once and {result['wrong_after_wait']:,} after "
            "the wait: read a non_blocking download only after synchronizing on it")


def stale_read(num_elements: int = 1 << 24) -> dict[str, Any]:
    """Read a ``non_blocking`` device-to-host copy before and after waiting for it; count the wrong elements.

    On a GPU: a long kernel queue runs first, so the copy cannot have landed when the
    host reads. On a CPU: the same steps under ``simulated_cuda()``, where the
    buffer holds ``GARBAGE`` until its event is waited for (a model of ordering).
    """
    from synclab.device import has_cuda
    from synclab.sim import cuda as sim_cuda
    from synclab.reference import record

    if has_cuda():
        x = torch.randn(2048, 2048, device="cuda")
        for _ in range(20):  # keep the device busy for a while: the copy queues behind this
            x = torch.tanh(x @ x) * 0.5
        values = torch.full((num_elements,), 3.0, device="cuda") + x[0, 0] * 0  # [n], ready only after the queue
        # A sentinel first: the caching host allocator may hand back a pinned block that already holds
        # 3.0 from an earlier run, and a copy that has not landed would then look right.
        host = torch.full((num_elements,), -1.0, pin_memory=True)
        host.copy_(values, non_blocking=True)
        early_wrong = int((host != 3.0).sum())  # read at once: the copy may not have landed
        torch.cuda.synchronize()
        late_wrong = int((host != 3.0).sum())
        result = {"device": "cuda", "num_elements": num_elements, "wrong_before_wait": early_wrong,
                  "wrong_after_wait": late_wrong}
        record("ch3", "stale_read", result)
        return result
    values = torch.full((num_elements,), 3.0)  # stands for device memory inside the simulation
    with sim_cuda.simulated_cuda():
        event = torch.cuda.Event()
        host = sim_cuda.copy_to_host_async(values)
        event.record()
        early_wrong = int((host != 3.0).sum())
        event.synchronize()
        late_wrong = int((host != 3.0).sum())
    return {"device": "simulated", "num_elements": num_elements, "wrong_before_wait": early_wrong,
            "wrong_after_wait": late_wrong}


def bandwidth_figures() -> tuple[Any, Any, str] | None:
    """The two bandwidth charts and their label: measured here on a GPU, else from a recorded GPU reference, else None."""
    from synclab import figures
    from synclab.provenance import Provenance
    from synclab.reference import load

    found, label = bandwidth_sweep(), ""
    if found is not None:
        label = Provenance.from_dict(found["provenance"]).label
    else:
        for data in load("ch3").values():
            if "bandwidth" in data["results"]:
                found, label = data["results"]["bandwidth"], "reference run: " + Provenance.from_dict(data["provenance"]).label
                break
    if found is None:
        return None
    return (figures.bandwidth_figure(found, "gbps", "Host-to-device bandwidth", label),
            figures.bandwidth_figure(found, "host_us", "Time the host spends inside .to()", label), label)
