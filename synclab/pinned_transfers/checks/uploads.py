"""Chapter 3, Exercises 3.1 to 3.4: the uploads of PR #41429, and their checks.

* 3.1 ``async_tensor_h2d`` (``engine/torch_utils.py``): host data into pinned memory, then a non-blocking upload;
* 3.2 ``Sampler.gather_specific_token_logprobs`` (``engine/sampler.py``): the padded id matrix built on pinned host memory;
* 3.3 ``GPUModelRunner._init_model_kwargs`` (``engine/model_inputs.py``): token types from host-side lengths;
* 3.4 ``GPUModelRunner._prepare_kv_sharing_fast_prefill``: the tail padded from a device scalar, not ``.item()``.
"""

from __future__ import annotations

import math
import random
from contextlib import nullcontext
from typing import Any, Callable, Sequence

import numpy as np
import torch

from synclab.checks import Check, CheckFailed, CheckReport, expect, expect_equal, run_checks, found_right
from synclab.device import is_device_tensor, pick_device, pin_questions, simulated_device, to_device
from synclab.sim import cuda as sim_cuda
from synclab.engine.pool_metadata import PoolingParams
from synclab.engine.sampler import LogprobsTensors
from synclab.sim.pinning import PinnedMemoryUnavailable, simulated_pinning
from synclab.syncs import SyncKind
from synclab.engine.torch_utils import HostData
from synclab.answer_keys import answer_key
from synclab.answer_keys.runners import runs_with_the_answer


from synclab.pinned_transfers.checks.common import (KIND_HINTS, PIN_HINT, READ_BACK_HINT, counted, expect_no_syncs,
                                                    pinning_refused, report_data)
from synclab.pinned_transfers.workloads import RunnerClass, SamplerClass, logprob_case, runner_for, token_type_case

H2DFunction = Callable[..., torch.Tensor]

# ----------------------------------------------------------------------------- Exercise 3.1: async_tensor_h2d


def _h2d_cases(rng: random.Random) -> list[tuple[str, dict[str, Any], str | None]]:
    """(case, its host data as :func:`host_input` describes it, the dtype asked for): plain data, so that the same
    case is built wherever the answer runs."""
    n = rng.randint(0, 600)
    ints = [rng.randrange(-1000, 1000) for _ in range(n)]
    floats = [rng.uniform(-1, 1) for _ in range(n)]
    grid = [[float(6 * row + col) for col in range(6)] for row in range(4)]  # a 4x6 float32 tensor, transposed
    return [
        ("list of ints", {"kind": "list", "values": [3, 1, 4, 1, 5]}, None),
        ("list of ints, dtype=int32", {"kind": "list", "values": [3, 1, 4, 1, 5]}, "int32"),
        ("list of floats (torch.tensor makes float32)", {"kind": "list", "values": [0.5, 1.5, 2.25]}, None),
        # float32 cannot hold these: a list made float32 first and converted after loses them
        ("list of floats, dtype=float64", {"kind": "list", "values": [0.1, 16777217.0]}, "float64"),
        ("nested list, dtype=float32", {"kind": "list", "values": [[1, 2], [3, 4], [5, 6]]}, "float32"),
        ("empty list, dtype=int32", {"kind": "list", "values": []}, "int32"),
        ("NumPy int32 array", {"kind": "numpy", "values": [7, 8, 9], "dtype": "int32"}, None),
        ("NumPy float64 array, dtype=float32",
         {"kind": "numpy", "values": np.linspace(0, 1, 7).tolist(), "dtype": "float64"}, "float32"),
        ("CPU tensor, dtype=int32", {"kind": "tensor", "values": list(range(10)), "dtype": "int64"}, "int32"),
        # a dtype NumPy has not: a path through numpy cannot carry it
        ("bfloat16 CPU tensor", {"kind": "tensor", "values": [0.5, -1.25, 3.0], "dtype": "bfloat16"}, None),
        # a transposed tensor has no gaps: pinned as it is, it goes up in one copy, transposed on the device too
        ("transposed CPU tensor", {"kind": "tensor", "values": grid, "dtype": "float32", "transposed": True}, None),
        ("pinned transposed CPU tensor",
         {"kind": "tensor", "values": grid, "dtype": "float32", "transposed": True, "pinned": True}, None),
        # a slice of a wider tensor's columns has gaps, which pinning keeps: torch uploads it through a temporary
        ("slice of a wider CPU tensor's columns",
         {"kind": "tensor", "values": grid, "dtype": "float32", "columns": 4}, None),
        ("pinned slice of a wider CPU tensor's columns",
         {"kind": "tensor", "values": grid, "dtype": "float32", "columns": 4, "pinned": True}, None),
        # pinned and contiguous: it may go up as it is, in the dtype the caller asks for
        ("pinned CPU tensor, dtype=int64", {"kind": "tensor", "values": [3, 1, 4, 1, 5], "dtype": "int32",
                                            "pinned": True}, "int64"),
        (f"random list of {n} ints", {"kind": "list", "values": ints}, rng.choice([None, "int32", "int64"])),
        (f"random NumPy array of {n} floats", {"kind": "numpy", "values": floats, "dtype": "float32"}, None),
        (f"random CPU tensor of {n} ints", {"kind": "tensor", "values": ints, "dtype": "int64"},
         rng.choice([None, "int32"])),
    ]


def host_input(spec: dict[str, Any]) -> HostData:
    """A case's host data from its description: ``kind`` list, numpy or tensor, its ``values`` (nested lists), its
    ``dtype`` (numpy's and torch's names agree), ``transposed`` (a tensor's transpose: not contiguous, no gaps),
    ``columns`` (the first so many columns of each row: a view with gaps), ``pinned`` (the tensor in pinned memory,
    strides kept, gaps too: built where pinned memory is available)."""
    if spec["kind"] == "list":
        return spec["values"]
    if spec["kind"] == "numpy":
        return np.array(spec["values"], dtype=spec["dtype"])
    tensor = torch.tensor(spec["values"], dtype=getattr(torch, spec["dtype"]))
    tensor = tensor.t() if spec.get("transposed") else tensor
    tensor = tensor[:, :spec["columns"]] if spec.get("columns") else tensor  # [rows, columns] of [rows, wider]
    return tensor.pin_memory() if spec.get("pinned") else tensor


def tensor_data(t: Any) -> dict[str, Any]:
    """What a check compares of a result, as plain data: is it a tensor, where, its dtype, shape and values."""
    if not isinstance(t, torch.Tensor):
        return {"tensor": False, "type": type(t).__name__}
    return {"tensor": True, "on_device": is_device_tensor(t), "device": str(t.device), "dtype": str(t.dtype),
            "shape": list(t.shape), "values": t.detach().cpu().tolist()}


def _device(name: str) -> Any:
    """The device a case names: the lab's (``"pick"``), the host's (``"cpu"``), the simulated streams' (``"sim"``)."""
    return {"pick": pick_device(), "cpu": "cpu", "sim": simulated_device()}[name]


@runs_with_the_answer
def upload_outcome(impl: H2DFunction, spec: dict[str, Any], device: str, dtype: str | None,
                   pinning: bool = True) -> dict[str, Any]:
    """One call ``impl(data, device, dtype)``, counted, where pinned memory is available or not (WSL): its result, its
    syncs, whether it asked ``is_pin_memory_available()`` while it ran; or, where it asked for pinned memory the
    platform does not have, what it was told. A runner (:mod:`synclab.answer_keys.runners`)."""
    target = _device(device)
    with simulated_pinning(pinning):
        data = host_input(spec)  # a pinned input is pinned where pinned memory is available
        asked = pin_questions()
        try:
            got, report = counted(lambda: impl(data, target, getattr(torch, dtype) if dtype else None))
        except PinnedMemoryUnavailable as exc:
            return {"unavailable": str(exc).split(":")[0]}
        return {"result": tensor_data(got), "syncs": report_data(report), "asked": pin_questions() != asked}


@runs_with_the_answer
def back_to_back_uploads(impl: H2DFunction, values: list[list[int]]) -> dict[str, Any]:
    """Uploads of ``values`` (int64) one after another on the simulated streams, no wait between them: the races the
    streams saw, then each result (a runner)."""
    with simulated_pinning(True), sim_cuda.simulated_cuda() as device:
        uploads = [counted(lambda: impl(data, simulated_device(), torch.int64), simulate=True)[0] for data in values]
    # read only now: a read between the calls would be a wait, and the calls would no longer run back to back
    return {"races": [str(race) for race in device.races], "results": [tensor_data(u) for u in uploads]}


def _flat(values: Any) -> list[Any]:
    return [x for v in values for x in _flat(v)] if isinstance(values, list) else [values]


def _same_upload(got: dict[str, Any], spec: dict[str, Any], dtype: str | None, case: str) -> None:
    want = _host_reference(spec, dtype)
    expect(got["tensor"] and got["on_device"], "the result must be a device tensor",
           got=got["type"] if not got["tensor"] else "a host tensor",
           hint="return the tensor that .to(device, non_blocking=True) gives back, with `device` as the caller "
                "passed it (on a machine without a GPU the lab's device is a stand-in, which torch.device(device) "
                "turns into the CPU)", case=case)
    float64_hint = ""
    if (got["dtype"], want["dtype"]) == ("torch.float64", "torch.float32"):
        float64_hint = (f"the caller asked for dtype {dtype}: a NumPy array or a tensor keeps its own dtype (float64 "
                        "here) until you convert it: in the upload itself (.to(device, dtype=dtype, "
                        "non_blocking=True)) or before pinning (converted after pinning, it is a new, pageable tensor)"
                        if dtype is not None and spec["kind"] != "list" else
                        "torch.tensor(data) makes Python floats float32, torch's default dtype; np.asarray makes them "
                        "float64: build a list with torch.tensor")
    kept_hint = ("with dtype None the result keeps the input's own dtype (a NumPy int32 array gives int32): a "
                 ".tolist() drops it; build from the array or tensor itself (torch.as_tensor, .pin_memory())"
                 ) if dtype is None and spec["kind"] != "list" else ""
    default_hint = (f"with dtype None a list takes torch.tensor's own default ({want['dtype']} here): let "
                    "torch.tensor(data) choose, do not pick one yourself") if dtype is None and spec["kind"] == "list" \
        else ""
    expect_equal(got["dtype"], want["dtype"], what="dtype",
                 hint=float64_hint or kept_hint or default_hint or "pass dtype both when building and in .to()",
                 case=case)
    expect_equal(tuple(got["shape"]), tuple(want["shape"]), what="shape", case=case)
    rounded = (want["dtype"] == "torch.float64" and spec["kind"] == "list" and got["values"] != want["values"]
               and _flat(got["values"]) == [float(np.float32(v)) for v in _flat(want["values"])])  # float32 on the way
    expect(got["values"] == want["values"], "values differ", expected=_flat(want["values"])[:8],
           got=_flat(got["values"])[:8], case=case,
           hint="the caller asked for float64, and these values went through float32 on the way (torch.tensor(data) "
                "without the dtype makes float32, and converting after cannot restore them): build the host tensor in "
                "the caller's dtype, torch.tensor(data, dtype=dtype, ...)" if rounded else "")
    found_right(want)  # found equal to the host's own torch.tensor(data, dtype): dtype, shape and values


def _check_h2d_values(impl: H2DFunction, rng: random.Random) -> None:
    for case, spec, dtype in _h2d_cases(rng):
        _same_upload(upload_outcome(impl, spec, "pick", dtype)["result"], spec, dtype, case)
    # the device is the caller's: one the lab would not pick (the host's) must be where the tensor lands
    case = "device='cpu' (the caller names the host): a host tensor with the values"
    got = upload_outcome(impl, {"kind": "list", "values": [3, 1, 4]}, "cpu", "int64")["result"]
    expect(got["tensor"] and not got["on_device"] and got["device"] == "cpu",
           "the tensor must land on the device the caller names", expected="a host tensor",
           got=got["type"] if not got["tensor"] else f"a tensor on {got['device']}"
           + (" (the lab's device)" if got["on_device"] else ""), case=case,
           hint="upload to the `device` argument (.to(device, ...)), not to a device of your own choosing")
    expect_equal(got["values"], [3, 1, 4], what="values", case=case)


# A module constant (vLLM's PIN_MEMORY) is read once, on the machine the process runs on; the check plays a GPU machine
# and WSL in one process, so the question must come inside the call. Told apart by behaviour: no question asked.
ASKED_BEFORE_HINT = ("for this input your upload did not ask is_pin_memory_available(): either it decides from an "
                     "answer read earlier, such as a module constant (vLLM's PIN_MEMORY, read once at import on this "
                     "machine), while the check plays a GPU machine and WSL in one process (ask inside the call), or "
                     "its path for this kind of data never pins (pin there too: a CPU tensor as well as a list); in "
                     "short: " + PIN_HINT)


GAPS_HINT = ("this tensor is a slice of a wider tensor's columns, a view with gaps between its rows, and pinning keeps "
             "them (pin_memory() keeps a tensor's strides): torch uploads a view with gaps through a contiguous "
             "temporary it makes in pageable memory, a staging copy after all. Pin a contiguous copy instead "
             "(.contiguous() first), asking is_pin_memory_available() inside the call (if your path does not pin a "
             "CPU tensor at all, that is the fault)")


def _check_h2d_syncs(impl: H2DFunction, rng: random.Random) -> None:
    for case, spec, dtype in _h2d_cases(rng):
        call = upload_outcome(impl, spec, "pick", dtype)
        staged = call["syncs"]["staged_count"]
        if staged and spec.get("columns"):  # pinned, but with gaps? said first
            hint = GAPS_HINT
        elif staged and not call["asked"]:
            hint = ASKED_BEFORE_HINT
        elif staged and dtype:  # it asked, and still staged: converted?
            hint = (f"here the caller asks for {dtype}: a conversion on the host after pinning (.to(dtype) before the "
                    "upload) makes a new tensor, in pageable memory. Convert in the upload itself, or build the pinned "
                    f"tensor in that dtype. In general: {PIN_HINT}")
        else:  # an upload's hint is the pinning one; a sync of another kind (a read back, a wait) gets its kind's
            events = call["syncs"]["events"]
            kind = SyncKind(events[0][0]) if events else SyncKind.H2D_COPY
            hint = PIN_HINT if kind is SyncKind.H2D_COPY else KIND_HINTS.get(kind, PIN_HINT)
        expect_no_syncs(call["syncs"], "the upload", hint, case)
        _same_upload(call["result"], spec, dtype, f"the counted call: {case}")  # a call counted is a call checked


def _check_h2d_wsl(impl: H2DFunction, rng: random.Random) -> None:
    for case, spec, dtype in _h2d_cases(rng):
        if spec.get("pinned"):  # WSL has no pinned memory to hold it
            continue
        call = upload_outcome(impl, spec, "pick", dtype, pinning=False)
        if "unavailable" in call:
            raise pinning_refused(call["unavailable"], case)
        _same_upload(call["result"], spec, dtype, case)
        expect_no_syncs(call["syncs"], "the upload", "keep non_blocking=True: without pinning it is the best there is",
                        case, staged_ok=True)


RACE_MESSAGE = "a host write into a pinned buffer an upload still needs"
H2D_RACE_HINT = ("a non_blocking upload reads its pinned source when the stream gets to it, not when .to() returns, "
                 "and the next call can come first: stage each call's data in a new pinned tensor "
                 "(torch.tensor(data, pin_memory=...) or .pin_memory()), never in one buffer kept across calls")


def _check_h2d_races(impl: H2DFunction, rng: random.Random) -> None:
    """Back-to-back uploads of the same shape on the simulated streams, no wait between them: a staging buffer kept
    across calls is refilled before the first upload has read it."""
    values = [[rng.randrange(100) for _ in range(6)] for _ in range(3)]
    ran = back_to_back_uploads(impl, values)
    if ran["races"]:  # a race names its fault, and explains the wrong values it causes: read it first
        raise CheckFailed(f"{RACE_MESSAGE}: the host wrote it again (in the same call or the next) before that upload "
                          "had run", got=ran["races"][0], hint=H2D_RACE_HINT, names_fault=True,
                          case="3 uploads of 6 ints each, back to back, no wait between them")
    for call, (got, data) in enumerate(zip(ran["results"], values)):
        _same_upload(got, {"kind": "list", "values": data}, "int64",
                     f"the counted calls: upload {call} of 3, back to back")


# An id outside the vocabulary reached the given gather: padding of -1, or from torch.empty (whatever the memory held)
GATHER_CRASH_HINTS = (("is out of bounds", "an id outside the vocabulary reached the gather: every padded entry of the id "
                       "matrix must be 0 (not -1), and torch.empty leaves whatever the memory held (start from "
                       "torch.zeros, or write the padding yourself)"),)


# A flat .view of a transposed tensor: torch names the stride, not the input that has it
NOT_CONTIGUOUS_HINT = (("view size is not compatible", "a transposed tensor, or a slice of a wider one's columns, is "
                        "not contiguous, so .view cannot flatten it: copy it whole into a buffer of its shape "
                        "(buffer.copy_(data)), or let .contiguous() then .pin_memory() make the pinned copy"),
                       ("unsupported ScalarType", "NumPy has no such dtype (bfloat16, for one): keep a CPU tensor a "
                        "tensor, and pin a contiguous copy of it"),
                       ("Can't pin tensor constructed from", "torch.tensor pins the list it copies, but refuses a "
                        "tensor or a NumPy array, on every machine: pin those with .pin_memory() (a pinned copy), or "
                        "copy them into a buffer from torch.empty(..., pin_memory=pin)"))

CHECKS_3_1 = [
    Check("3.1", "same values, dtype and shape as torch.tensor(data, dtype) for lists, arrays, tensors", _check_h2d_values,
          crash_hints=NOT_CONTIGUOUS_HINT, id="values"),
    Check("3.1", "0 syncs: every upload is non_blocking from pinned memory", _check_h2d_syncs,
          crash_hints=NOT_CONTIGUOUS_HINT, id="no-syncs"),
    Check("3.1", "no pinned buffer refilled before its upload ran (back-to-back calls, simulated streams)",
          _check_h2d_races, id="no-refill-race"),
    Check("3.1", "WSL (no pinned memory): no error, right values, pageable non_blocking upload", _check_h2d_wsl,
          crash_hints=NOT_CONTIGUOUS_HINT, id="wsl"),
]


def check_async_tensor_h2d(impl: H2DFunction, seed: int | None = None) -> CheckReport:
    """Exercise 3.1: run every check against the reader's ``async_tensor_h2d``."""
    return run_checks("Exercise 3.1 — async_tensor_h2d", CHECKS_3_1, impl, seed=seed)


# ----------------------------------------------------------------------------- Exercise 3.2: gather_specific_token_logprobs


def logprob_spec(rng: random.Random, batch: int, vocab: int, max_ids: int = 6, share_with_ids: float = 0.7,
                 ids: dict[int, list[int]] | None = None) -> dict[str, Any]:
    """A logprob case as plain data (:func:`logprob_inputs` builds it): its own seed, drawn here, and its shape;
    ``ids``, when given, replaces the drawn requests' ids."""
    return {"seed": rng.randrange(2**31), "batch": batch, "vocab": vocab, "max_ids": max_ids, "share": share_with_ids,
            "ids": ids}


def logprob_inputs(spec: dict[str, Any], device: Any = None) -> tuple[torch.Tensor, dict[int, list[int]], torch.Tensor]:
    """The logits, requested ids and sampled tokens of ``spec`` (:func:`logprob_spec`), the same in every process."""
    logits, ids, sampled = logprob_case(random.Random(spec["seed"]), spec["batch"], spec["vocab"], spec["max_ids"],
                                        spec["share"], device=device)
    return logits, ids if spec["ids"] is None else spec["ids"], sampled


def _logprobs_data(got: Any) -> dict[str, Any]:
    """What a check compares of a gather's result, as plain data."""
    if got is None:
        return {"none": True}
    if not isinstance(got, LogprobsTensors):
        return {"type": type(got).__name__}
    return {"ids_dtype": str(got.logprob_token_ids.dtype), "ids": got.logprob_token_ids.cpu().tolist(),
            "logprobs": got.logprobs.cpu().double().tolist(), "ranks": got.selected_token_ranks.cpu().tolist()}


@runs_with_the_answer
def gather_outcomes(sampler_cls: SamplerClass, specs: list[dict[str, Any]], pinning: bool = True,
                    streams: bool = False) -> dict[str, Any]:
    """One sampler of ``sampler_cls`` asked each case of ``specs`` in turn (a spec of None: the last one's inputs
    again), each call counted; where pinned memory is available or not (WSL), on the simulated streams or not. Each
    call's result and syncs, the streams' races, or what a call that asked for pinned memory where there is none was
    told (a runner: :mod:`synclab.answer_keys.runners`)."""
    calls: list[tuple[Any, Any]] = []
    uploads: list[int] = []  # on the simulated streams: the non_blocking uploads each call queued
    with simulated_pinning(pinning), sim_cuda.simulated_cuda() if streams else nullcontext() as device:
        sampler = sampler_cls()
        inputs: Any = None
        for spec in specs:
            inputs = logprob_inputs(spec, simulated_device() if streams else None) if spec is not None else inputs
            logged = len(device.log.entries) if streams else 0
            try:
                calls.append(counted(lambda: sampler.gather_specific_token_logprobs(*inputs),
                                     simulate=True if streams else None))
            except PinnedMemoryUnavailable as exc:
                return {"unavailable": str(exc).split(":")[0]}
            uploads.append(sum(op == "copy to device" for op in device.log.ops()[logged:]) if streams else 0)
    # read only now: a read between the calls would be a wait, and the calls would no longer run back to back
    return {"calls": [{"result": _logprobs_data(got), "syncs": report_data(report), "uploads": n}
                      for (got, report), n in zip(calls, uploads)],
            "races": [str(race) for race in device.races] if streams else []}


def _rounded(values: list[float], digits: int = 4) -> list[float]:
    """Logprobs as a report shows them: to the checks' tolerance (the reference computes in float64, the answer in
    float32; their last digits are not a difference)."""
    return [round(v, digits) if math.isfinite(v) else v for v in values]


def _same_logprobs(got: dict[str, Any], spec: dict[str, Any], case: str) -> None:
    want = _gather_reference(spec)
    if want is None:
        expect(got.get("none", False), "no request asked for token ids: return None",
               got=got.get("type", "LogprobsTensors"), case=case)
        found_right(None)
        return
    expect("ids" in got, "return a LogprobsTensors", got="NoneType" if got.get("none") else got.get("type"), case=case)
    want_ids, want_values, want_ranks = want
    expect_equal(got["ids_dtype"], "torch.int32", what="dtype of logprob_token_ids", case=case)
    got_ids = got["ids"]
    expect_equal(len(got_ids), len(want_ids), what="number of rows (one per request, with ids or not)", case=case,
                 hint="every request of the batch gets a row, in batch order: one that asked for no ids holds its "
                      "sampled token, then padding")
    # ids asked for, and not one arrived anywhere (ids in the wrong rows are another mistake, with its own hint)
    unfilled = not any(any(g[1:]) for g in got_ids) and any(any(w[1:]) for w in want_ids)
    for row, (g, w) in enumerate(zip(got_ids, want_ids)):
        expect(g == w, f"token ids of request {row} differ", expected=w, got=g,
               hint="only padding reached the device where ids were asked for: a non_blocking upload sends what its "
                    "pinned buffer holds when the copy runs, so fill the buffers before their .to(device), never "
                    "after" if unfilled else
                    "column 0 is the sampled token, then the request's ids, then 0s as padding; request i's ids go "
                    "in row i (logprob_token_ids is keyed by row), a request without ids keeps its row", case=case)
    got_values = torch.tensor(got["logprobs"], dtype=torch.float64)
    want_t = torch.tensor(want_values, dtype=torch.float64)
    expect_equal(tuple(got_values.shape), tuple(want_t.shape), what="shape of logprobs", case=case)
    padded = torch.isinf(want_t)
    wrong_pad = torch.isinf(got_values) != padded  # [batch, max_ids + 1]
    if bool(wrong_pad.any()):
        row = int(wrong_pad.any(dim=1).nonzero()[0])  # the first request whose padding is wrong: show that one
        masked = (torch.isinf(got_values[row]) & ~padded[row]).nonzero().flatten().tolist()  # real slots masked
        real = int((~padded[row]).sum())  # column 0 and the request's ids
        left = (padded[row] & ~torch.isinf(got_values[row])).nonzero().flatten().tolist()  # padding not masked
        fills = {float(v) for v in got_values[row][left].tolist()} if left else set()
        if left and not masked and len(fills) == 1 and min(fills) < -1e6:  # masked, with a large finite number
            hint = (f"the padded slots hold {min(fills):g}, not -inf: fill them with float('-inf') (masked_fill "
                    "with -inf, as the baseline does); a large negative number is still a logprob")
        elif not bool(torch.isinf(got_values).any()) and int(padded.sum()) > 1:  # no slot masked anywhere
            hint = ("no slot of any row was masked: valid_mask is True at column 0 and at a request's ids only, "
                    "and False in every padded slot past them (a mask True everywhere keeps the padding)")
        elif not masked and left == [real]:  # only the first slot past the ids: a slice one long
            hint = (f"column {real}, the first slot past the request's ids, was left unmasked: its ids fill columns 1 "
                    f"to len(ids) inclusive (row[1:len(ids) + 1]; column 0 is the sampled token), so padding starts at "
                    f"column len(ids) + 1")
        elif not masked:
            hint = ("the padded slots must be -inf: mask them after the gather (every column past the request's "
                    "ids, in every row)")
        elif masked == [0]:  # the sampled token's column: real in every row
            hint = ("column 0 (the sampled token) was masked as padding: it is real in every row, also in a request "
                    "that asked for no ids (one not in logprob_token_ids): mark it for every row, not only in the "
                    "loop over the requests' ids, and before the mask's upload")
        elif masked == [real - 1] and want_ids[row][real - 1] != 0:  # only the last id, not a 0: a slice one short
            hint = (f"the request's last id (column {real - 1}) was masked as padding: its ids fill columns 1 to "
                    f"len(ids) inclusive (row[1:len(ids) + 1]; column 0 is the sampled token): one more than the slice "
                    f"row[1:len(ids)]")
        else:
            hint = (f"requested ids were masked as padding (columns {masked[:4]}): the mask marks each request's "
                    "own ids by how many it asked for (a requested token 0 is real), never by the ids' values")
        raise CheckFailed(f"padding must be -inf, and only padding: request {row}'s row is wrong", case=case,
                          expected=_rounded(want_values[row]), got=_rounded(got_values[row].tolist()), hint=hint)
    close = torch.isclose(got_values, want_t, atol=1e-4) | padded
    row = int((~close).any(dim=1).nonzero()[0]) if not bool(close.all()) else 0
    only_column_0 = not bool(close.all()) and bool(close[:, 1:].all())  # the ids right, the sampled token's not
    expect(bool(close.all()), f"logprobs differ: request {row}'s row first", expected=_rounded(want_values[row]),
           got=_rounded(got_values[row].tolist()), case=case,
           hint=("only column 0, the sampled token's, differs (the ids are right): gather once column 0 holds the "
                 "sampled token, i.e. write it into the ids on the device before computing the logprobs")
           if only_column_0 else "log_softmax over the vocabulary, then gather")
    expect_equal(got["ranks"], want_ranks, what="ranks of the sampled tokens",
                 hint="rank = how many logits are strictly larger than the sampled token's", case=case)
    # the ids and the padding were compared exactly (the ranks report theirs); the logprobs within a tolerance,
    # which two right answers may round differently: not reported
    found_right([got_ids, padded.tolist()])


_FIXED_LOGPROB_CASES = [
    ("request 1 asks for nothing; token 0 is requested", 3, 8, {0: [1, 2], 2: [0, 5, 7]}),
    ("the sampled token is among the requested ids", 2, 16, {0: [3, 3], 1: [9]}),
    ("a request with an empty list", 2, 8, {0: [], 1: [4]}),
    ("one request", 1, 32, {0: [31, 0, 15, 2]}),
]


def _check_gather_fixed(sampler_cls: SamplerClass, rng: random.Random) -> None:
    for case, batch, vocab, ids in _FIXED_LOGPROB_CASES:  # the case named before the call: a crash reports it
        spec = logprob_spec(rng, batch, vocab, ids=ids)
        _same_logprobs(gather_outcomes(sampler_cls, [spec])["calls"][0]["result"], spec, case)


_NO_IDS_HINT = ("no request asked for ids: return None before building anything (with no lists there is no longest "
                "one to size the matrix by)")


def _check_gather_empty(sampler_cls: SamplerClass, rng: random.Random) -> None:
    case = "4 requests, logprob_token_ids {}"  # named before the call: a crash reports it
    got = gather_outcomes(sampler_cls, [logprob_spec(rng, 4, 16, ids={})])["calls"][0]["result"]
    expect(got.get("none", False), "no request asked for token ids: return None",
           got=got.get("type", "LogprobsTensors"), case=case, hint=_NO_IDS_HINT)
    found_right(None)


def _check_gather_random(sampler_cls: SamplerClass, rng: random.Random) -> None:
    for trial in range(12):
        batch, vocab = rng.randint(1, 64), rng.choice([16, 1000, 4096])
        case = f"random batch {trial}: {batch} requests, vocab {vocab}"  # named before the call: a crash reports it
        spec = logprob_spec(rng, batch, vocab, max_ids=rng.randint(0, 12))
        _same_logprobs(gather_outcomes(sampler_cls, [spec])["calls"][0]["result"], spec, case)


def _check_gather_syncs(sampler_cls: SamplerClass, rng: random.Random) -> None:
    spec = logprob_spec(rng, 64, 1000, share_with_ids=1.0)
    call = gather_outcomes(sampler_cls, [spec])["calls"][0]
    read_back = ("`sampled` lives on the device, so reading it back is a sync: fill column 0 on the device, after "
                 "the upload")
    events = call["syncs"]["events"]
    kind = SyncKind(events[0][0]) if events else None
    # the hint of the first sync's own kind: a read back is most likely `sampled`'s, an upload's is an upload's
    hint = read_back if KIND_HINTS.get(kind) == READ_BACK_HINT else KIND_HINTS.get(kind, PIN_HINT)
    expect_no_syncs(call["syncs"], "gather_specific_token_logprobs", hint, "64 requests, all with ids")
    _same_logprobs(call["result"], spec, "the counted call: 64 requests, all with ids")


GATHER_RACE_HINT = ("a non_blocking upload reads its pinned source when the stream gets to it, not when .to() returns: "
                    "finish every write into a buffer before you queue its upload, and write it no more after. The "
                    "next call can come first too (nothing waits between two steps): build the id matrix and "
                    "the mask in new pinned tensors on every call (torch.zeros(..., pin_memory=self.pin_memory)); "
                    "torch's pinned allocator hands that memory out again only once the copy has run")


def _check_gather_races(sampler_cls: SamplerClass, rng: random.Random) -> None:
    """Back-to-back calls on the simulated streams, no wait between them, as in an engine loop that runs ahead."""
    # The largest first: a buffer kept from the first call is refilled after. Then the same batch twice, as a steady
    # decode step repeats its shape: a buffer cached for a shape is reused there.
    calls = [(8, 64, False), (3, 64, False), (8, 64, False), (8, 64, True)]
    specs = [None if same else logprob_spec(rng, batch, vocab, share_with_ids=1.0) for batch, vocab, same in calls]
    ran = gather_outcomes(sampler_cls, specs, streams=True)
    if ran["races"]:  # a race names its fault, and explains the wrong values it causes: read it first
        raise CheckFailed(f"{RACE_MESSAGE}: the host wrote it again (in the same call or a later one) before that "
                          "upload had run", got=ran["races"][0], hint=GATHER_RACE_HINT, names_fault=True,
                          case=" then ".join(f"{b} requests" + (" (the same batch again)" if same else "")
                                             for b, _, same in calls) + ", no wait between the calls")
    shown = [spec or specs[n - 1] for n, spec in enumerate(specs)]  # the same batch again: the one before
    for call, (result, spec) in enumerate(zip(ran["calls"], shown)):
        _same_logprobs(result["result"], spec, f"the counted calls: call {call} of {len(calls)}, "
                                               f"{spec['batch']} requests, back to back")


def _check_gather_uploads(sampler_cls: SamplerClass, rng: random.Random) -> None:
    """As many non_blocking uploads for 64 requests as for 1: the padded ids and the mask go up whole."""
    sizes = (1, 64)
    specs = [logprob_spec(rng, batch, 64, share_with_ids=1.0) for batch in sizes]
    calls = [gather_outcomes(sampler_cls, [spec], streams=True)["calls"][0] for spec in specs]  # a sampler each
    counts = [call["uploads"] for call in calls]
    for call, spec in zip(calls, specs):
        _same_logprobs(call["result"], spec, f"the counted calls: {spec['batch']} requests, all with ids")
    fewer = counts[1] < counts[0]  # some uploads at 64 were not asynchronous ones: staged, or made blocking
    expect(counts[0] == counts[1], "the number of non_blocking uploads from pinned memory "
           + ("falls" if fewer else "grows") + " with the batch", case="1 request, then 64, all with ids",
           expected="as many at 64 requests as at 1", got=f"{counts[0]} at 1 request, {counts[1]} at 64",
           hint="at 64 requests some uploads were not asynchronous ones from pinned memory: the 0-syncs check "
                "says which (a view of a pinned buffer with gaps is one)" if fewer else
                "build the whole padded id matrix and its mask on the host, then upload each once: an upload per "
                "request is a copy, and a driver call, per request")


def _check_gather_wsl(sampler_cls: SamplerClass, rng: random.Random) -> None:
    token_zero_case, batch, vocab, ids = _FIXED_LOGPROB_CASES[0]  # a path of its own for WSL meets token 0 too
    for case, spec in (("8 requests", logprob_spec(rng, 8, 64)), (token_zero_case, logprob_spec(rng, batch, vocab, ids=ids))):
        ran = gather_outcomes(sampler_cls, [spec], pinning=False)
        if "unavailable" in ran:
            raise pinning_refused(ran["unavailable"], case)
        _same_logprobs(ran["calls"][0]["result"], spec, f"{case}, no pinned memory")
        expect_no_syncs(ran["calls"][0]["syncs"], "gather_specific_token_logprobs", "keep non_blocking=True",
                        case, staged_ok=True)


CHECKS_3_2 = [
    Check("3.2", "fixed cases: rows without ids, token 0, the sampled token requested, one request", _check_gather_fixed,
          crash_hints=GATHER_CRASH_HINTS, id="fixed-cases"),
    Check("3.2", "no requested ids: None", _check_gather_empty, hint=_NO_IDS_HINT, id="no-ids-none",
          after="fixed-cases"),  # the lab gives that line: it counts once the matrix is right
    Check("3.2", "same as a plain reference on random batches (1 to 64 requests, vocab 16 to 4096)",
          _check_gather_random, crash_hints=GATHER_CRASH_HINTS, id="random-batches"),
    Check("3.2", "0 syncs: the id matrix and the mask built on pinned host memory, uploaded non_blocking",
          _check_gather_syncs, crash_hints=GATHER_CRASH_HINTS, id="no-syncs"),
    Check("3.2", "no pinned buffer written before its upload ran (back-to-back calls, simulated streams)",
          _check_gather_races, crash_hints=GATHER_CRASH_HINTS, id="no-refill-race"),
    Check("3.2", "as many uploads for 64 requests as for 1 (simulated streams)", _check_gather_uploads, crash_hints=GATHER_CRASH_HINTS, id="uploads"),
    Check("3.2", "WSL (no pinned memory): no error, same result, token 0 requested too", _check_gather_wsl, crash_hints=GATHER_CRASH_HINTS, id="wsl"),
]


def check_gather_specific_token_logprobs(sampler_cls: SamplerClass, seed: int | None = None) -> CheckReport:
    """Exercise 3.2: run every check against the reader's ``Sampler`` subclass."""
    return run_checks("Exercise 3.2 — gather_specific_token_logprobs", CHECKS_3_2, sampler_cls, seed=seed)


# ----------------------------------------------------------------------------- Exercise 3.3: _init_model_kwargs


def _params_data(params: list[PoolingParams]) -> list[list[Any]]:
    """Requests' pooling params as plain data: [task, extra kwargs] each."""
    return [[p.task, p.extra_kwargs] for p in params]


def _params_of(data: list[list[Any]]) -> list[PoolingParams]:
    return [PoolingParams(task, extra) for task, extra in data]


def _kwargs_data(got: Any) -> dict[str, Any]:
    """What a check compares of ``_init_model_kwargs``'s result, as plain data."""
    if not isinstance(got, dict):
        return {"type": type(got).__name__}
    ids = got.get("token_type_ids")
    described = {"keys": sorted(map(str, got)), "empty": not got}
    if isinstance(ids, torch.Tensor):
        described.update(on_device=is_device_tensor(ids), dtype=str(ids.dtype), values=ids.detach().cpu().tolist())
    return described


@runs_with_the_answer
def kwargs_outcomes(runner_cls: RunnerClass, steps: list[dict[str, Any]], pinning: bool = True,
                    is_pooling_model: bool = True) -> dict[str, Any]:
    """One runner of ``runner_cls`` through ``steps`` (each its requests' ``params`` as data and ``lens``), asked
    ``_init_model_kwargs()`` once per step, counted; where pinned memory is available or not (WSL). Each call's
    result and syncs, or what a call that asked for pinned memory where there is none was told (a runner)."""
    calls = []
    with simulated_pinning(pinning):
        runner = runner_for(runner_cls, _params_of(steps[0]["params"]), steps[0]["lens"],
                            is_pooling_model=is_pooling_model)
        for n, step in enumerate(steps):
            if n:
                runner.set_requests(_params_of(step["params"]), step["lens"])
            try:
                got, report = counted(runner._init_model_kwargs)
            except PinnedMemoryUnavailable as exc:
                return {"unavailable": str(exc).split(":")[0]}
            calls.append({"result": _kwargs_data(got), "syncs": report_data(report)})
    return {"calls": calls}


def _step(params: list[PoolingParams], lens: list[int]) -> dict[str, Any]:
    return {"params": _params_data(params), "lens": lens}


def _same_token_types(got: dict[str, Any], params: list[PoolingParams], lens: list[int], case: str) -> None:
    want = _token_type_ids_reference(_params_data(params), lens)
    expect("keys" in got, "_init_model_kwargs returns a dict", got=got.get("type"), case=case)
    if want is None:
        expect(got["empty"], "no request carries token types: return {}", got=got["keys"], case=case)
        return
    expect_equal(got["keys"], ["token_type_ids"], what="keys of the model kwargs", case=case)
    expect(got.get("on_device", False), "token_type_ids must be on the device",
           got="a host tensor" if "on_device" in got else "not a tensor", case=case)
    expect_equal(got["dtype"], "torch.int32", what="dtype of token_type_ids", case=case)
    expect_equal(got["values"], want, what="token_type_ids",
                 hint="per request: arange(seq_len) >= boundary (no boundary: all 0), concatenated", case=case)


def _only_call(runner_cls: RunnerClass, params: list[PoolingParams], lens: list[int], **kwargs: Any) -> dict[str, Any]:
    return kwargs_outcomes(runner_cls, [_step(params, lens)], **kwargs)["calls"][0]


def _check_types_fixed(runner_cls: RunnerClass, rng: random.Random) -> None:
    params = [PoolingParams("classify", {"compressed_token_type_ids": 2}), PoolingParams("classify"),
              PoolingParams("classify", {"compressed_token_type_ids": 0}),
              PoolingParams("classify", {"compressed_token_type_ids": 3})]
    got = _only_call(runner_cls, params, [5, 3, 4, 3])["result"]
    _same_token_types(got, params, [5, 3, 4, 3], "boundary 2 of 5, none, 0 of 4, 3 of 3")


def _check_types_shrunk_batch(runner_cls: RunnerClass, rng: random.Random) -> None:
    """The runner's host lengths are a buffer for max_num_reqs: past this step's requests they hold stale values."""
    params, lens = [PoolingParams("classify", {"compressed_token_type_ids": 2}), PoolingParams("classify")], [4, 3]
    # the batch shrank: entries 2 and 3 still hold 7 and 8
    before = [PoolingParams("classify", {"compressed_token_type_ids": 1})] * 4
    steps = [_step(before, [5, 6, 7, 8]), _step(params, lens)]
    got = kwargs_outcomes(runner_cls, steps)["calls"][1]["result"]
    _same_token_types(got, params, lens, "4 requests last step, 2 now: the lengths past request 2 are stale "
                      "(read only the first num_reqs of optimistic_seq_lens_cpu)")


def _check_types_no_kwargs(runner_cls: RunnerClass, rng: random.Random) -> None:
    cases = [("no request carries token types", [PoolingParams("classify")] * 3, [4, 2, 7], True),
             ("empty batch", [], [], True),
             ("not a pooling model", [PoolingParams("classify", {"compressed_token_type_ids": 1})], [3], False)]
    for case, params, lens, pooling in cases:
        got = _only_call(runner_cls, params, lens, is_pooling_model=pooling)["result"]
        expect(got.get("empty", False), "return {}: there is nothing to pass", got=got.get("keys", got.get("type")),
               case=case, hint="return {} before building anything when no request carries a boundary (or the model "
                               "is not a pooling model): the model takes no token_type_ids then, not a tensor of zeros")


def _check_types_random(runner_cls: RunnerClass, rng: random.Random) -> None:
    for trial in range(12):
        params, lens = token_type_case(rng, rng.randint(1, 64), share_with_types=rng.random())
        case = f"random batch {trial}: {len(lens)} requests"  # named before the call: a crash reports it
        _same_token_types(_only_call(runner_cls, params, lens)["result"], params, lens, case)


def _check_types_syncs(runner_cls: RunnerClass, rng: random.Random) -> None:
    params, lens = token_type_case(rng, 64)
    # the host lengths' own edge, counted too: the batch shrank, and entries past it are stale
    shrunk = [PoolingParams("classify", {"compressed_token_type_ids": 1})] * 2
    first, second = kwargs_outcomes(runner_cls, [_step(params, lens), _step(shrunk, [3, 2])])["calls"]
    hint = "take the lengths from self.optimistic_seq_lens_cpu (host), not self.seq_lens (device); " + PIN_HINT
    expect_no_syncs(first["syncs"], "_init_model_kwargs", hint, "64 requests")
    _same_token_types(first["result"], params, lens, "the counted call: 64 requests")
    expect_no_syncs(second["syncs"], "_init_model_kwargs", hint, "64 requests last step, 2 now")
    _same_token_types(second["result"], shrunk, [3, 2], "the counted call: 64 requests last step, 2 now (the "
                      "lengths past request 2 are stale: read only the first num_reqs of optimistic_seq_lens_cpu)")


def _check_types_wsl(runner_cls: RunnerClass, rng: random.Random) -> None:
    params, lens = token_type_case(rng, 8, share_with_types=1.0)
    ran = kwargs_outcomes(runner_cls, [_step(params, lens)], pinning=False)
    if "unavailable" in ran:
        raise pinning_refused(ran["unavailable"], "8 requests")
    _same_token_types(ran["calls"][0]["result"], params, lens, "8 requests, no pinned memory")
    expect_no_syncs(ran["calls"][0]["syncs"], "_init_model_kwargs", "keep non_blocking=True", "8 requests",
                    staged_ok=True)


CHECKS_3_3 = [
    Check("3.3", "fixed case: boundaries 2, none, 0 and at the end", _check_types_fixed, random=False, id="fixed-case"),
    Check("3.3", "a batch that shrank: only this step's requests' lengths count",
          _check_types_shrunk_batch, random=False, id="shrunk-batch"),
    Check("3.3", "nothing to pass ({}): no token types, empty batch, not a pooling model",
          _check_types_no_kwargs, random=False, id="nothing-to-pass"),
    Check("3.3", "same as a plain reference on random batches (1 to 64 requests)", _check_types_random,
          id="random-batches"),
    Check("3.3", "0 syncs: host-side lengths, pinned buffer, non_blocking upload", _check_types_syncs, id="no-syncs"),
    Check("3.3", "WSL (no pinned memory): no error, same result", _check_types_wsl, id="wsl"),
]


def check_init_model_kwargs(runner_cls: RunnerClass, seed: int | None = None) -> CheckReport:
    """Exercise 3.3: run every check against the reader's ``_init_model_kwargs``."""
    return run_checks("Exercise 3.3 — _init_model_kwargs (token_type_ids)", CHECKS_3_3, runner_cls, seed=seed)


# ----------------------------------------------------------------------------- Exercise 3.4: _prepare_kv_sharing_fast_prefill

STALE = 1_000_000  # what an earlier, larger step left in the persistent buffer: an index far past this batch


@runs_with_the_answer
def prefill_outcomes(runner_cls: RunnerClass, steps: list[list[int]]) -> dict[str, Any]:
    """One runner of ``runner_cls`` whose persistent buffer holds stale entries, asked to pad each step's logits
    indices in turn, each call counted: what it returned, whether that is the buffer, the buffer's entries, the
    CUDA-graph size, the syncs (a runner: :mod:`synclab.answer_keys.runners`)."""
    runner = runner_cls(max_num_tokens=1024)
    runner.kv_sharing_fast_prefill_logits_indices.fill_(STALE)
    calls = []
    for indices in steps:
        logits_indices = to_device(torch.tensor(indices, dtype=torch.int32), runner.device)  # [n] device
        got, report = counted(lambda: runner._prepare_kv_sharing_fast_prefill(logits_indices))
        buf = runner.kv_sharing_fast_prefill_logits_indices
        result = ({"tensor": True, "buffer": got.data_ptr() == buf.data_ptr(), "values": got.cpu().tolist()}
                  if isinstance(got, torch.Tensor) else {"tensor": False, "type": type(got).__name__})
        calls.append({"result": result, "tail": buf[len(indices):].cpu().tolist(),
                      "padded_len": runner.pad_for_cudagraph(len(indices)) if indices else 0,
                      "syncs": report_data(report)})
    return {"calls": calls}


def _same_padding(call: dict[str, Any], indices: list[int], case: str) -> None:
    want = _fast_prefill_reference(indices, call["padded_len"])
    got = call["result"]
    expect(got["tensor"], "return a tensor", got=got.get("type"), case=case)
    expect(got["buffer"], "return a slice of the persistent buffer",
           got="a new tensor", hint="CUDA graphs replay with the buffer's address: return buf[:num_padded]", case=case)
    expect_equal(got["values"], want, what=f"padded indices ({len(indices)} -> {len(want)})",
                 hint="copy the indices, then fill the tail with the last one (stale entries point past the batch)",
                 case=case)
    tail = call["tail"]  # the contract: every entry after the indices, not only up to the pad
    stale = next((i for i, v in enumerate(tail) if v != indices[-1]), None)
    expect(stale is None, "the buffer after the indices must hold the last index in every entry",
           expected=f"{indices[-1]} in all {len(tail)} entries after the first {len(indices)}",
           got=None if stale is None else f"{tail[stale]} at entry {len(indices) + stale} "
                                          f"(the CUDA-graph size here is {len(want)})",
           hint="fill buf[num_logits:], the whole tail, as vLLM does: a graph captured for a larger size reads past "
                "the padded slice you return", case=case)


def _check_prefill_fixed(runner_cls: RunnerClass, rng: random.Random) -> None:
    cases = [("3 indices, padded to 4", [4, 9, 17]), ("1 index", [0]), ("8 indices: no padding", list(range(3, 11))),
             ("5 indices after a step of 7", [1, 2, 3, 4, 5]), ("600 indices: beyond the captured sizes", list(range(600)))]
    case = "a step of 7 indices, then " + "; ".join(c for c, _ in cases)  # named before the call: a crash reports it
    # a larger step first: its indices stay in the buffer
    ran = prefill_outcomes(runner_cls, [list(range(100, 107))] + [indices for _, indices in cases])
    for (case, indices), call in zip(cases, ran["calls"][1:]):
        _same_padding(call, indices, case)


def _check_prefill_empty(runner_cls: RunnerClass, rng: random.Random) -> None:
    try:
        prefill_outcomes(runner_cls, [[]])
    except NotImplementedError:  # the stub: not written yet, which the report says as such
        raise
    except Exception:  # any error of the answer's choosing is loud: an assert as vLLM's, a ValueError, its own class
        return
    expect(False, "no logits indices is a bug upstream: fail loudly (vLLM asserts num_logits > 0)",
           got="returned normally", case="empty logits_indices")


def _check_prefill_random(runner_cls: RunnerClass, rng: random.Random) -> None:
    steps = []
    for _ in range(15):
        n = rng.randint(1, 700)
        steps.append(sorted(rng.sample(range(4 * n), n)))
    case = f"{len(steps)} random steps, one runner"  # named before the call: a crash reports it
    for trial, (indices, call) in enumerate(zip(steps, prefill_outcomes(runner_cls, steps)["calls"])):
        _same_padding(call, indices, f"random step {trial}: {len(indices)} indices")


def _check_prefill_syncs(runner_cls: RunnerClass, rng: random.Random) -> None:
    call = prefill_outcomes(runner_cls, [[2, 7, 11]])["calls"][0]
    expect_no_syncs(call["syncs"], "_prepare_kv_sharing_fast_prefill",
                    "assign the 0-d device tensor logits_indices[-1] to the tail; .item() reads it back", "3 indices")
    _same_padding(call, [2, 7, 11], "the counted call: 3 indices, padded to 4, stale entries after them")


CHECKS_3_4 = [
    Check("3.4", "fixed cases: padded with the last index, stale entries overwritten, the buffer returned",
          _check_prefill_fixed, random=False, id="fixed-cases"),
    Check("3.4", "no logits indices: fail loudly", _check_prefill_empty, random=False, id="no-indices-fail"),
    Check("3.4", "same as a plain reference on random steps (1 to 700 indices)", _check_prefill_random,
          id="random-steps"),
    Check("3.4", "0 syncs: the tail is filled on the device", _check_prefill_syncs, random=False, id="no-syncs"),
]


def check_fast_prefill(runner_cls: RunnerClass, seed: int | None = None) -> CheckReport:
    """Exercise 3.4: run every check against the reader's ``_prepare_kv_sharing_fast_prefill``."""
    return run_checks("Exercise 3.4 — _prepare_kv_sharing_fast_prefill", CHECKS_3_4, runner_cls, seed=seed)


@answer_key("3.1")
def _host_reference(spec: dict[str, Any], dtype: str | None = None) -> dict[str, Any]:
    """What ``async_tensor_h2d(data, device, dtype)`` must hold once the copy has landed, for the host data ``spec``
    describes (:func:`host_input`): its dtype, shape and values, as data."""
    data = host_input({**spec, "pinned": False})  # the same values: where they live changes nothing here
    want = getattr(torch, dtype) if dtype else None
    if isinstance(data, np.ndarray):
        data = torch.from_numpy(data.copy())
    if isinstance(data, torch.Tensor):
        tensor = data.detach().clone().to(dtype=want) if want is not None else data.detach().clone()
    else:
        tensor = torch.tensor(data, dtype=want)
    return {"dtype": str(tensor.dtype), "shape": list(tensor.shape), "values": tensor.tolist()}


@answer_key("3.2")
def _gather_reference(spec: dict[str, Any]) -> tuple[list[list[int]], list[list[float]], list[int]] | None:
    """The same result as plain lists, computed request by request on the host, for the case ``spec`` describes
    (:func:`logprob_spec`)."""
    logits, logprob_token_ids, sampled_t = logprob_inputs(spec)
    logits, sampled = logits.cpu(), sampled_t.cpu().tolist()
    if not logprob_token_ids:
        return None
    width = 1 + max(len(t) for t in logprob_token_ids.values())
    logprobs = logits.double().log_softmax(dim=-1)
    ids, values, ranks = [], [], []
    for row, token in enumerate(sampled):
        wanted = [token] + list(logprob_token_ids.get(row, []))
        ids.append(wanted + [0] * (width - len(wanted)))
        values.append([logprobs[row, t].item() for t in wanted] + [float("-inf")] * (width - len(wanted)))
        ranks.append(int((logits[row] > logits[row, token]).sum()))
    return ids, values, ranks


@answer_key("3.3")
def _token_type_ids_reference(pooling_params: Sequence[Sequence[Any]], seq_lens: Sequence[int]) -> list[int] | None:
    """The flat token types as a list (None: no request carries them, so no kwarg), for requests whose pooling
    params are given as data ([task, extra kwargs] each)."""
    bounds = [(extra or {}).get("compressed_token_type_ids") for _, extra in pooling_params]
    if all(b is None for b in bounds):
        return None
    return [int(b is not None and j >= b) for b, n in zip(bounds, seq_lens) for j in range(n)]


@answer_key("3.4")
def _fast_prefill_reference(logits_indices: Sequence[int], padded_len: int) -> list[int]:
    """The indices, then the last one repeated up to ``padded_len``."""
    return list(logits_indices) + [logits_indices[-1]] * (padded_len - len(logits_indices))
