"""The one dtype vocabulary of ampdoctor: names, every spelling frameworks use for them, the half set,
exact-integer limits, the fake-tensor test and the names RoPE tables go by.

Static code (lint, explain, rules, config readers, `Policy`) works on canonical *names* (``"bf16"``) and
never imports torch; runtime code converts at the edge with `to_torch` / `name_of`.
"""

from __future__ import annotations

import re
from typing import Any

FP32, BF16, FP16, FP64 = "fp32", "bf16", "fp16", "fp64"
# Floating dtypes a precision policy can name, narrowest-range last.
FLOAT_NAMES: tuple[str, ...] = (FP32, BF16, FP16, FP64)
HALF: frozenset[str] = frozenset({BF16, FP16})
WIDE: frozenset[str] = frozenset({FP32, FP64})

PRETTY = {FP32: "float32", BF16: "bfloat16", FP16: "float16", FP64: "float64"}
TORCH_NAMES = {FP32: "torch.float32", BF16: "torch.bfloat16", FP16: "torch.float16", FP64: "torch.float64"}

# Every spelling of a dtype that torch, Policy strings and framework configs use (lower case; a leading
# "torch." is stripped before lookup). Precision-mode strings that imply a dtype are in PRECISION_MODES.
ALIASES: dict[str, str] = {
    "fp32": FP32, "float32": FP32, "f32": FP32, "float": FP32, "32": FP32, "full": FP32,
    "bf16": BF16, "bfloat16": BF16, "bfloat": BF16,
    "fp16": FP16, "float16": FP16, "half": FP16, "f16": FP16, "16": FP16,
    "fp64": FP64, "float64": FP64, "f64": FP64, "double": FP64, "64": FP64,
}
# Framework precision modes and the dtype they compute in: Lightning ("bf16-mixed", "16-true"...),
# accelerate ("no"), DeepSpeed/HF spellings of autocast dtypes ("amp_bf16"), TF32 (fp32 storage).
PRECISION_MODES: dict[str, str] = {
    "bf16-mixed": BF16, "bf16-true": BF16, "16-mixed": FP16, "16-true": FP16, "32-true": FP32, "64-true": FP64,
    "fp32-true": FP32, "no": FP32, "tf32": FP32, "amp_bf16": BF16, "amp_fp16": FP16,
}

# Largest integer up to which every integer is exactly representable: positions and timesteps above it
# collapse onto their neighbours (pytorch #137774: bf16 256, fp16 2048).
EXACT_INT: dict[str, int] = {BF16: 1 << 8, FP16: 1 << 11, FP32: 1 << 24, FP64: 1 << 53}

# Identifier words that name a rotary table or its frequencies (lint tokens) and the attribute/buffer names
# the runtime audit and `ampdoctor.fix` recognise as tables.
ROPE_WORDS: frozenset[str] = frozenset({"cos", "sin", "freq", "freqs", "cis", "rope", "rotary", "sincos", "cossin", "theta"})
ROPE_TABLE_NAME = re.compile(r"(^|[._])(cos|sin|inv_freq|freqs?|rope|rotary|theta)", re.IGNORECASE)
COS_SIN_NAME = re.compile(r"^(?P<pre>_?)(?P<fn>cos|sin)(?P<post>_cached|_cache|_table)?$")


def _key(text: str) -> str:
    return text.strip().lower().removeprefix("torch.")


def canonical(value: Any) -> str | None:
    """The canonical name of a dtype given as a name, an alias, or a torch dtype; None if not a float dtype."""
    if isinstance(value, str):
        key = _key(value)
        return ALIASES.get(key) or (key if key in PRETTY else None)
    text = str(value)  # torch.dtype prints as "torch.bfloat16"; no torch import needed to read it
    if text.startswith("torch."):
        return ALIASES.get(_key(text))
    return None


class DTypeName(str):
    """A canonical dtype name (``"bf16"``) that also equals the torch dtype it names: ``Policy`` fields hold these, so
    ``policy.params == torch.bfloat16`` is True rather than silently False, while a Policy stays torch-free. It is
    a ``str`` (JSON, YAML through `str()`, dict keys and ``== "bf16"`` behave as the plain name) and hashes as one."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            return str.__eq__(self, other)
        if type(other).__module__ == "torch" and type(other).__name__ == "dtype":
            return canonical(other) == str(self)
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = str.__hash__


def parse(text: str) -> str:
    """A dtype name from user text; raises ValueError naming the accepted names."""
    if not isinstance(text, str):
        raise ValueError(f"expected a dtype name, got {type(text).__name__}")
    found = canonical(text)
    if found is None:
        shown = text.strip() if len(text) <= 40 else text.strip()[:37] + "..."
        raise ValueError(f"unknown dtype {shown!r}: expected one of fp32, bf16, fp16, fp64")
    return found


# torch dtype -> `name_of` it: a handful of dtypes, named thousands of times in the report of a large audit.
_NAMED: dict[Any, str] = {}


def name_of(dtype: Any) -> str:
    """Short name of a dtype (``bf16``); dtypes outside the float vocabulary print as torch prints them."""
    try:
        return _NAMED[dtype]
    except (KeyError, TypeError):  # not named yet, or not hashable
        pass
    name = canonical(dtype) or str(dtype).removeprefix("torch.")
    if type(dtype).__module__ == "torch" and type(dtype).__name__ == "dtype":
        _NAMED[dtype] = name
    return name


def is_half(dtype: Any) -> bool:
    return canonical(dtype) in HALF if dtype is not None else False


def exact_int_limit(dtype: Any) -> int | None:
    name = canonical(dtype)
    return EXACT_INT.get(name) if name else None


def describe(names: Any) -> str:
    """``{"bf16"}`` -> ``bfloat16``; ``{"bf16", "fp16"}`` -> ``bfloat16 or float16``."""
    ordered = [PRETTY[n] for n in FLOAT_NAMES if n in set(names)]
    return " or ".join(ordered) if ordered else "unknown"


def describe_half(names: Any) -> str:
    """The half dtypes among the ones a value can take, said as one possibility where it can also be another:
    ``{"bf16"}`` -> ``bfloat16``; ``{"fp32", "bf16"}`` -> ``bfloat16 where the run chooses it (else float32)``. A
    value the run decides (a config field, an argument) is not known to be half: saying "float32 or bfloat16" as
    what it is would state a guess."""
    given = set(names)
    half, other = given & HALF, given - HALF
    if not other or not half:
        return describe(given)
    return f"{describe(half)} where the run chooses it (else {describe(other)})"


def to_torch(value: Any) -> Any:
    """The torch dtype for a name or alias (a torch dtype is returned unchanged). Needs torch."""
    import torch

    if isinstance(value, torch.dtype):
        return value
    return getattr(torch, PRETTY[parse(value)])


def is_fake(tensor: Any) -> bool:
    """A tensor without data: FakeTensor (FakeTensorMode) or on the meta device."""
    kind = type(tensor).__name__
    device = getattr(getattr(tensor, "device", None), "type", None)
    return "Fake" in kind or device == "meta"
