"""Plain data: values as JSON, never code or objects, for what must cross a boundary as data alone.

Used where an answer's results leave the process that computed them: the grader's wire to an answer judged apart
(:mod:`synclab.lab.judged_apart`, :mod:`synclab.lab.answer_process`) and the expected results the students' install
stores in place of the answers it does not ship (:func:`synclab.answer_keys.stored.stored_answer`). What crosses is what a
check may compare: None, bools, ints, floats (NaN and the infinities too), strings, lists, tuples, sets, dicts,
fractions, NumPy scalars and the package's enums (``SyncKind``). A subclass of a plain type crosses as its value and
its class's name, and comes back as a subclass of the same name that holds nothing but the value: a check still sees
that an answer returned "a MyInt", never its methods. Anything else crosses as its type's name and its ``repr``, an
:class:`Opaque` value equal to nothing else.

Decoding builds no object the data names beyond those: no pickle, no import outside ``synclab``.
"""

from __future__ import annotations

import enum
import hashlib
import importlib
import json
import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

_PLAIN = (bool, int, float, str)


class Opaque:
    """A value of a type that does not cross as data: its type's name and its repr, equal to nothing else."""

    def __init__(self, type_name: str, text: str) -> None:
        self.type_name, self.text = type_name, text

    def __repr__(self) -> str:
        return self.text

    def __eq__(self, other: object) -> bool:
        return self is other

    __hash__ = object.__hash__


def _opaque_class(name: str) -> type:
    """A subclass of :class:`Opaque` named as the answer's type was, so that a check saying "not a Foo" says so."""
    safe = name if name.isidentifier() else "value"
    return type(safe, (Opaque,), {})


def _float(value: float) -> Any:
    return value if math.isfinite(value) else repr(value)  # "nan", "inf", "-inf"


def encode(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON-able data that :func:`decode` reads back."""
    if depth > 50:
        return {"opaque": type(value).__name__, "repr": "a value nested too deep"}
    exact = type(value)
    if value is None or exact in (bool, int, str):
        return {"v": value}
    if exact is float:
        return {"f": _float(value)}
    if isinstance(value, enum.Enum) and exact.__module__.split(".")[0] == "synclab":
        return {"enum": f"{exact.__module__}:{exact.__qualname__}", "name": value.name}
    if exact.__module__ == "numpy" and hasattr(value, "dtype") and getattr(value, "shape", None) == ():
        item = value.item()
        return {"numpy": str(value.dtype), "item": _float(item) if isinstance(item, float) else item}
    if exact is Fraction:
        return {"fraction": [value.numerator, value.denominator]}
    if isinstance(value, _PLAIN) and not isinstance(value, enum.Enum):  # a subclass of a plain type
        base = next(b for b in _PLAIN if isinstance(value, b))
        return {"subclass": exact.__name__, "of": base.__name__, "value": encode(base(value), depth + 1)}
    if exact is list and all(type(v) is int for v in value):  # token lists, as 4.1's checks send them: compact
        return {"ints": list(value)}
    if exact in (list, tuple, set, frozenset):
        items = [encode(v, depth + 1) for v in value]
        if exact in (set, frozenset):  # in one order in every process: a set's own follows the hash seed
            items.sort(key=lambda item: json.dumps(item, sort_keys=True))
        return {exact.__name__: items}
    if exact is dict:
        return {"dict": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    if isinstance(value, Mapping):  # a mappingproxy, an OrderedDict, a Counter: read back as the dict it holds
        return {"dict": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()],
                "mapping": exact.__name__}
    try:
        text = repr(value)[:300]
    except Exception:  # noqa: BLE001 - a repr that raises still names its type
        text = f"<a {exact.__name__}>"
    return {"opaque": exact.__name__, "repr": text}


def _number(value: Any) -> Any:
    return float(value) if isinstance(value, str) else value


def key(value: Any) -> str:
    """One string per value, the same in every process: what a stored result is looked up by (as its digest)."""
    return json.dumps(encode(value), sort_keys=True, separators=(",", ":"))


def digest(value: Any) -> str:
    """A short name of :func:`key`'s string: what a stored result is filed under."""
    return hashlib.sha256(key(value).encode()).hexdigest()[:32]


def decode(data: Any) -> Any:
    """The value :func:`encode` wrote."""
    if not isinstance(data, dict) or len(data) == 0:
        raise ValueError(f"not plain data: {data!r:.80}")
    if "v" in data:
        value = data["v"]
        if value is not None and type(value) not in (bool, int, str):
            raise ValueError(f"not plain data: {data!r:.80}")
        return value
    if "f" in data:
        return float(_number(data["f"]))
    if "enum" in data:
        module, _, qualname = data["enum"].partition(":")
        if module.split(".")[0] != "synclab":
            raise ValueError(f"an enum outside the package: {module}")
        owner: Any = importlib.import_module(module)
        for part in qualname.split("."):
            owner = getattr(owner, part)
        if not (isinstance(owner, type) and issubclass(owner, enum.Enum)):
            raise ValueError(f"not an enum: {data['enum']}")
        return owner[data["name"]]
    if "numpy" in data:
        import numpy as np

        return np.dtype(data["numpy"]).type(_number(data["item"]))
    if "fraction" in data:
        numerator, denominator = data["fraction"]
        return Fraction(int(numerator), int(denominator))
    if "subclass" in data:
        base = {"int": int, "float": float, "str": str}[data["of"]]
        name = data["subclass"] if str(data["subclass"]).isidentifier() else "value"
        return type(name, (base,), {})(decode(data["value"]))
    if "ints" in data:
        if not (isinstance(data["ints"], list) and all(type(v) is int for v in data["ints"])):
            raise ValueError(f"not plain data: {data!r:.80}")
        return list(data["ints"])
    for kind, build in (("list", list), ("tuple", tuple), ("set", set), ("frozenset", frozenset)):
        if kind in data:
            return build(decode(v) for v in data[kind])
    if "dict" in data:
        return {decode(k): decode(v) for k, v in data["dict"]}
    if "opaque" in data:
        return _opaque_class(str(data["opaque"]))(str(data["opaque"]), str(data.get("repr", "")))
    raise ValueError(f"not plain data: {data!r:.80}")


# Tensors cross only when a runner says so (chapter 1's poolers return rows of their input, which the checks compare
# value for value): its dtype, shape and bytes, read back as a host tensor of the same values. Never by encode().
_TENSOR_DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")


def tensor_as_data(t: Any) -> dict:
    """A tensor's values as plain data (its dtype, shape and bytes in base64), wherever it lives; TypeError for a
    dtype outside the common ones (a complex tensor)."""
    import base64

    import torch

    values = t.detach().to("cpu").contiguous()  # [...] host
    dtype = str(values.dtype).removeprefix("torch.")
    if dtype not in _TENSOR_DTYPES:
        raise TypeError(f"a {dtype} tensor does not cross as data")
    raw = values.reshape(-1).view(torch.uint8).numpy().tobytes() if values.numel() else b""
    return {"dtype": dtype, "shape": list(values.shape), "bytes": base64.b64encode(raw).decode("ascii")}


def tensor_from_data(data: dict) -> Any:
    """The host tensor :func:`tensor_as_data` describes."""
    import base64

    import torch

    if data.get("dtype") not in _TENSOR_DTYPES:
        raise ValueError(f"not a tensor's dtype: {data.get('dtype')!r:.40}")
    dtype, shape = getattr(torch, data["dtype"]), [int(n) for n in data["shape"]]
    raw = bytearray(base64.b64decode(data["bytes"]))
    flat = torch.frombuffer(raw, dtype=torch.uint8) if raw else torch.zeros(0, dtype=torch.uint8)
    return flat.view(dtype).reshape(shape).clone()


def tensors_as_data(items: Any, facts: Any, other: Any, sequence: type | tuple = list) -> dict:
    """A result that should be a ``sequence`` of tensors and Nones (chapter 1's pooler outputs, chapter 2's
    ``pooler_output``), as data: each tensor's values (:func:`tensor_as_data`) and what ``facts(tensor)`` reads of it
    (a dict: whether it views a buffer, whether it is pinned), None as None, anything else, a tensor of a dtype that
    does not cross included, as ``other(item)``'s words; ``{"not_list": its type's name}`` when it is no sequence."""
    import torch

    from synclab.device import read_back_together

    if not isinstance(items, sequence):
        return {"not_list": type(items).__name__}
    # read together: one round trip where each read would cost one
    on_the_host = read_back_together([item for item in items if isinstance(item, torch.Tensor)])
    out: list[dict | None] = []
    for item in items:
        if item is None:
            out.append(None)
            continue
        try:
            out.append({"tensor": tensor_as_data(on_the_host.get(id(item), item)), **facts(item)}
                       if isinstance(item, torch.Tensor) else {"other": other(item)})
        except TypeError:  # a dtype that does not cross (complex): named, not compared
            out.append({"other": other(item)})
    return {"items": out}


def tensors_from_data(seen: dict, other: Any) -> list | None:
    """:func:`tensors_as_data` read back: host tensors, Nones and ``other(words)`` for the rest; None where the result
    was no sequence (``seen["not_list"]`` names what it was)."""
    if "not_list" in seen:
        return None
    return [None if item is None else tensor_from_data(item["tensor"]) if "tensor" in item else other(item["other"])
            for item in seen["items"]]
