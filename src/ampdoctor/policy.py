"""`Policy`: one vocabulary for where each tensor of a training step lives, in which dtype.

Grammar: ``"params=fp32, compute=bf16, reduce=fp32"`` (comma-separated key=value, whitespace
tolerated) or a preset name (``"bf16-mixed"``). Fields left out are derived from the ones given:

- ``compute`` defaults to ``params``; ``output`` to ``compute``;
- ``grads`` to ``params`` (autograd makes ``.grad`` in the parameter's dtype);
- ``grad_accum``, ``reduce`` and ``optimizer_state`` to fp32, or fp64 when params are fp64;
- ``loss_scale`` to ``dynamic`` when compute is fp16, else ``none``.

Fields hold canonical dtype *names* (``"bf16"``, a `dtypes.DTypeName` that also equals ``torch.bfloat16``), so a
Policy is built, parsed, compared and validated without torch; the ``*_dtype`` properties, `autocast()` and
`grad_scaler()` give torch objects to callers that have torch. A Policy knows no framework: exporters and readers live in `ampdoctor.frameworks`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, ContextManager

from ampdoctor import dtypes
from ampdoctor._quote import quoted
from ampdoctor.dtypes import BF16, FP16, FP32, FP64

if TYPE_CHECKING:
    from torch.amp import GradScaler

    from ampdoctor.core.model import Finding
    from ampdoctor.facts import RunFacts

LOSS_SCALES: tuple[str, ...] = ("none", "static", "dynamic")
DTYPE_FIELDS: tuple[str, ...] = ("params", "compute", "output", "grads", "grad_accum", "reduce", "optimizer_state")
# Longer policy text is cut in error messages: it is user input and may be anything.
_SHOWN = 60

_KEYS: dict[str, str] = {
    "params": "params", "p": "params", "param": "params",
    "compute": "compute", "c": "compute",
    "output": "output", "o": "output",
    "grads": "grads", "g": "grads", "grad": "grads",
    "grad_accum": "grad_accum", "accum": "grad_accum",
    "reduce": "reduce", "r": "reduce", "comm": "reduce",
    "optimizer_state": "optimizer_state", "optimizer": "optimizer_state", "opt": "optimizer_state",
    "loss_scale": "loss_scale", "loss_scaling": "loss_scale", "scale": "loss_scale",
}


@dataclass(frozen=True)
class Policy:
    """Precision of every tensor class in a training step. Build with `Policy.parse` or `Policy.preset`
    so that unspecified fields get their derived defaults; the constructor takes every field explicitly
    and accepts dtype names, aliases or torch dtypes."""

    params: str = FP32
    compute: str = FP32
    output: str = FP32
    grads: str = FP32
    grad_accum: str = FP32
    reduce: str = FP32
    optimizer_state: str = FP32
    loss_scale: str = "none"

    def __post_init__(self) -> None:
        for name in DTYPE_FIELDS:
            value = getattr(self, name)
            canonical = dtypes.canonical(value)
            if canonical is None:
                raise ValueError(f"{name}={str(value)[:_SHOWN]} is not a floating dtype ampdoctor knows (fp32, bf16, fp16, fp64)")
            object.__setattr__(self, name, dtypes.DTypeName(canonical))
        if self.loss_scale not in LOSS_SCALES:
            raise ValueError(f"unknown loss_scale {quoted(str(self.loss_scale), _SHOWN)}: expected one of {', '.join(LOSS_SCALES)}")

    # --- construction -------------------------------------------------------------------------------

    @classmethod
    def derive(cls, **given: Any) -> "Policy":
        """Fill the fields not given with the defaults documented at the top of this module."""
        params = dtypes.canonical(given.get("params", FP32)) or given.get("params")
        compute = dtypes.canonical(given.get("compute", params)) or given.get("compute")
        wide = FP64 if params == FP64 else FP32
        values = {
            "params": params,
            "compute": compute,
            "output": given.get("output", compute),
            "grads": given.get("grads", params),
            "grad_accum": given.get("grad_accum", wide),
            "reduce": given.get("reduce", wide),
            "optimizer_state": given.get("optimizer_state", wide),
            "loss_scale": given.get("loss_scale", "dynamic" if compute == FP16 else "none"),
        }
        return cls(**values)

    @classmethod
    def parse(cls, text: str) -> "Policy":
        """Parse ``"params=fp32, compute=bf16"`` (short keys p/c/o/g/r accepted) or a preset name."""
        if not isinstance(text, str):
            raise ValueError(f"a policy is a string such as 'bf16-mixed' or 'params=fp32,compute=bf16', got {type(text).__name__}")
        text = text.strip()
        if not text:
            raise ValueError("empty policy string: give key=value pairs or a preset name")
        if "=" not in text:
            return cls.preset(text)
        given: dict[str, Any] = {}
        for token in text.split(","):
            token = token.strip()
            if token:
                field_name, value = _parse_token(token)
                if field_name in given:
                    raise ValueError(f"policy key {quoted(token.partition('=')[0].strip(), _SHOWN)} given twice")
                given[field_name] = value
        return cls.derive(**given)

    @classmethod
    def preset(cls, name: str) -> "Policy":
        """A named preset: fp32, bf16-mixed, bf16-true, fp16-mixed, fp16-true (Lightning spellings accepted)."""
        key = name.strip().lower()
        key = _PRESET_ALIASES.get(key, key)
        try:
            return PRESETS[key]
        except KeyError:
            raise ValueError(f"unknown policy preset {quoted(name.strip(), _SHOWN)}: expected one of {', '.join(PRESETS)}") from None

    def __str__(self) -> str:
        return ",".join(f"{f.name}={getattr(self, f.name)}" for f in fields(self))

    @property
    def preset_name(self) -> str | None:
        """The preset this policy equals, if any."""
        return next((name for name, policy in PRESETS.items() if policy == self), None)

    def to_dict(self) -> dict[str, str]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    # --- torch dtypes, for callers that have torch ---------------------------------------------------

    @property
    def param_dtype(self) -> Any:
        return dtypes.to_torch(self.params)

    @property
    def compute_dtype(self) -> Any:
        return dtypes.to_torch(self.compute)

    @property
    def output_dtype(self) -> Any:
        return dtypes.to_torch(self.output)

    @property
    def grad_dtype(self) -> Any:
        return dtypes.to_torch(self.grads)

    @property
    def grad_accum_dtype(self) -> Any:
        return dtypes.to_torch(self.grad_accum)

    @property
    def reduce_dtype(self) -> Any:
        return dtypes.to_torch(self.reduce)

    @property
    def optimizer_state_dtype(self) -> Any:
        return dtypes.to_torch(self.optimizer_state)

    # --- validation ---------------------------------------------------------------------------------

    def validate(self, device: Any = None, *, facts: "RunFacts | None" = None) -> list["Finding"]:
        """Combinations that are known to fail or to train badly, judged by the same rules as config lint and
        the audit. `facts` says what else is known about the run (unknown facts never count as known);
        `device` (needs torch) adds the device's bf16 support to them."""
        from ampdoctor.core.engine import check_policy
        from ampdoctor.facts import RunFacts

        known = facts or RunFacts()
        if device is not None:
            from dataclasses import replace

            from ampdoctor.hardware import device_fact

            known = replace(known, devices=(device_fact(device),))
        return check_policy(self, known)

    # --- wiring (needs torch) -------------------------------------------------------------------------

    def autocast(self, device_type: str = "cuda") -> ContextManager[Any]:
        """`torch.autocast` to the compute dtype; with fp32/fp64 compute, autocast disabled (also an ambient one)."""
        import torch

        if self.compute in dtypes.WIDE:
            return torch.autocast(device_type=device_type, enabled=False)
        return torch.autocast(device_type=device_type, dtype=self.compute_dtype)

    def grad_scaler(self, device_type: str = "cuda") -> "GradScaler | None":
        """A GradScaler only when the policy asks for loss scaling with fp16 compute; None otherwise (bf16 never needs one)."""
        if self.loss_scale == "none" or self.compute != FP16:
            return None
        from torch.amp import GradScaler

        if self.loss_scale == "static":
            # torch's GradScaler cannot hold its scale fixed (backoff_factor must be < 1): "static" here
            # never grows the scale, and still halves it on an overflow rather than training on infs.
            return GradScaler(device_type, growth_interval=2**31 - 1)
        return GradScaler(device_type)


def _parse_token(token: str) -> tuple[str, str]:
    key, sep, value = token.partition("=")
    if not sep or not value.strip():
        raise ValueError(f"malformed policy token {quoted(token, _SHOWN)}: expected key=value")
    field_name = _KEYS.get(key.strip().lower().replace("-", "_"))
    if field_name is None:
        raise ValueError(f"unknown policy key {quoted(key.strip(), _SHOWN)} in {quoted(token, _SHOWN)}: expected one of {', '.join(sorted(set(_KEYS.values())))}")
    if field_name == "loss_scale":
        scale = value.strip().lower()
        if scale not in LOSS_SCALES:
            raise ValueError(f"unknown loss_scale {quoted(value.strip(), _SHOWN)} in {quoted(token, _SHOWN)}: expected one of {', '.join(LOSS_SCALES)}")
        return field_name, scale
    try:
        return field_name, dtypes.parse(value)
    except ValueError as exc:
        raise ValueError(f"{exc} (in {quoted(token, _SHOWN)})") from None


PRESETS: dict[str, Policy] = {
    "fp32": Policy.derive(params=FP32),
    "bf16-mixed": Policy.derive(params=FP32, compute=BF16),
    "bf16-true": Policy.derive(params=BF16, grad_accum=BF16, reduce=BF16, optimizer_state=BF16),
    "fp16-mixed": Policy.derive(params=FP32, compute=FP16),
    "fp16-true": Policy.derive(params=FP16, grad_accum=FP16, reduce=FP16, optimizer_state=FP16, loss_scale="none"),
}

# Lightning's precision strings and common spellings.
_PRESET_ALIASES = {
    "32": "fp32", "32-true": "fp32", "float32": "fp32",
    "bf16": "bf16-mixed", "bf16-mixed": "bf16-mixed", "bfloat16": "bf16-mixed",
    "16": "fp16-mixed", "16-mixed": "fp16-mixed", "fp16": "fp16-mixed",
    "16-true": "fp16-true", "bf16-true": "bf16-true",
}
