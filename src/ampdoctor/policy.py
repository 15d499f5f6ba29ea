"""`Policy`: one vocabulary for where each tensor of a training step lives, in which dtype.

Grammar: ``"params=fp32, compute=bf16, reduce=fp32"`` (comma-separated key=value, whitespace
tolerated) or a preset name (``"bf16-mixed"``). Fields left out are derived from the ones given:

- ``compute`` defaults to ``params``; ``output`` to ``compute``;
- ``grads`` to ``params`` (autograd makes ``.grad`` in the parameter's dtype);
- ``grad_accum``, ``reduce`` and ``optimizer_state`` to fp32, or fp64 when params are fp64;
- ``loss_scale`` to ``dynamic`` when compute is fp16, else ``none``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, ContextManager, Literal

import torch

from ampdoctor.rules import Finding, Location, finding

if TYPE_CHECKING:
    from torch.amp import GradScaler

LossScale = Literal["none", "static", "dynamic"]
LOSS_SCALES: tuple[str, ...] = ("none", "static", "dynamic")

HALF_DTYPES = (torch.bfloat16, torch.float16)

_DTYPE_NAMES: dict[str, torch.dtype] = {
    "fp32": torch.float32, "float32": torch.float32, "f32": torch.float32, "float": torch.float32, "32": torch.float32,
    "bf16": torch.bfloat16, "bfloat16": torch.bfloat16,
    "fp16": torch.float16, "float16": torch.float16, "half": torch.float16, "f16": torch.float16, "16": torch.float16,
    "fp64": torch.float64, "float64": torch.float64, "f64": torch.float64, "double": torch.float64,
}
_CANONICAL_NAME = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16", torch.float64: "fp64"}

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


def parse_dtype(text: str) -> torch.dtype:
    """Map a dtype name (``bf16``, ``torch.bfloat16``, ``float32``, ``half`` ...) to a torch dtype."""
    key = text.strip().lower().removeprefix("torch.")
    try:
        return _DTYPE_NAMES[key]
    except KeyError:
        raise ValueError(f"unknown dtype {text.strip()!r}: expected one of fp32, bf16, fp16, fp64") from None


def dtype_name(dtype: torch.dtype) -> str:
    """The short canonical name of a floating dtype (``fp32``, ``bf16``, ...); other dtypes print as torch does."""
    return _CANONICAL_NAME.get(dtype, str(dtype).removeprefix("torch."))


def is_half(dtype: torch.dtype | None) -> bool:
    return dtype in HALF_DTYPES


@dataclass(frozen=True)
class Policy:
    """Precision of every tensor class in a training step. Build with `Policy.parse` or `Policy.preset`
    so that unspecified fields get their derived defaults; the constructor takes every field explicitly."""

    params: torch.dtype = torch.float32
    compute: torch.dtype = torch.float32
    output: torch.dtype = torch.float32
    grads: torch.dtype = torch.float32
    grad_accum: torch.dtype = torch.float32
    reduce: torch.dtype = torch.float32
    optimizer_state: torch.dtype = torch.float32
    loss_scale: LossScale = "none"

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "loss_scale":
                if value not in LOSS_SCALES:
                    raise ValueError(f"unknown loss_scale {value!r}: expected one of {', '.join(LOSS_SCALES)}")
            elif value not in _CANONICAL_NAME:
                raise ValueError(f"{f.name}={value!r} is not a floating dtype ampdoctor knows (fp32, bf16, fp16, fp64)")

    # --- construction -------------------------------------------------------------------------------

    @classmethod
    def derive(cls, **given: Any) -> "Policy":
        """Fill the fields not given with the defaults documented at the top of this module."""
        params = given.get("params", torch.float32)
        wide = torch.float64 if params == torch.float64 else torch.float32
        compute = given.get("compute", params)
        values = {
            "params": params,
            "compute": compute,
            "output": given.get("output", compute),
            "grads": given.get("grads", params),
            "grad_accum": given.get("grad_accum", wide),
            "reduce": given.get("reduce", wide),
            "optimizer_state": given.get("optimizer_state", wide),
            "loss_scale": given.get("loss_scale", "dynamic" if compute == torch.float16 else "none"),
        }
        return cls(**values)

    @classmethod
    def parse(cls, text: str) -> "Policy":
        """Parse ``"params=fp32, compute=bf16"`` (short keys p/c/o/g/r accepted) or a preset name."""
        text = text.strip()
        if not text:
            raise ValueError("empty policy string: give key=value pairs or a preset name")
        if "=" not in text:
            return cls.preset(text)
        given: dict[str, Any] = {}
        for token in text.split(","):
            token = token.strip()
            if not token:
                continue
            key, sep, value = token.partition("=")
            if not sep or not value.strip():
                raise ValueError(f"malformed policy token {token!r}: expected key=value")
            field_name = _KEYS.get(key.strip().lower().replace("-", "_"))
            if field_name is None:
                raise ValueError(f"unknown policy key {key.strip()!r} in {token!r}: expected one of {', '.join(sorted(set(_KEYS.values())))}")
            if field_name in given:
                raise ValueError(f"policy key {key.strip()!r} given twice")
            if field_name == "loss_scale":
                scale = value.strip().lower()
                if scale not in LOSS_SCALES:
                    raise ValueError(f"unknown loss_scale {value.strip()!r} in {token!r}: expected one of {', '.join(LOSS_SCALES)}")
                given[field_name] = scale
            else:
                try:
                    given[field_name] = parse_dtype(value)
                except ValueError as exc:
                    raise ValueError(f"{exc} (in {token!r})") from None
        return cls.derive(**given)

    @classmethod
    def preset(cls, name: str) -> "Policy":
        """A named preset: fp32, bf16-mixed, bf16-true, fp16-mixed, fp16-true (Lightning spellings accepted)."""
        key = name.strip().lower()
        key = _PRESET_ALIASES.get(key, key)
        try:
            return PRESETS[key]
        except KeyError:
            raise ValueError(f"unknown policy preset {name.strip()!r}: expected one of {', '.join(PRESETS)}") from None

    def __str__(self) -> str:
        return ",".join(
            f"{f.name}={getattr(self, f.name) if f.name == 'loss_scale' else dtype_name(getattr(self, f.name))}"
            for f in fields(self)
        )

    @property
    def preset_name(self) -> str | None:
        """The preset this policy equals, if any."""
        return next((name for name, policy in PRESETS.items() if policy == self), None)

    def to_dict(self) -> dict[str, str]:
        return dict(token.split("=") for token in str(self).split(","))

    # --- validation ---------------------------------------------------------------------------------

    def validate(self, device: str | torch.device | None = None) -> list[Finding]:
        """Combinations that are known to fail or to train badly; see the rules named in each finding."""
        here = Location(label=f"policy {self}")
        out: list[Finding] = []
        if self.compute == torch.bfloat16 and self.loss_scale != "none":
            out.append(finding("grad-scaler-with-bf16", f"loss_scale={self.loss_scale} with bf16 compute: bf16 needs no loss scaling and GradScaler's CUDA kernels reject bf16 gradients", here))
        if self.compute == torch.float16 and self.loss_scale == "none":
            out.append(finding("fp16-without-loss-scaling", "fp16 compute with loss_scale=none: small gradients will underflow", here))
        if self.loss_scale != "none" and self.grads == torch.float16:
            out.append(finding("grad-scaler-with-fp16-params", "loss scaling with fp16 gradients: GradScaler.unscale_ raises 'Attempting to unscale FP16 gradients.'", here))
        if self.grads != self.params:
            out.append(finding("grad-dtype-mismatch", f"grads={dtype_name(self.grads)} but params={dtype_name(self.params)}: autograd accumulates .grad in the parameter's dtype, so the next backward fails; use grad_accum for a wider accumulation buffer", here))
        if is_half(self.grad_accum):
            out.append(finding("bf16-grad-accumulation", f"grad_accum={dtype_name(self.grad_accum)}: micro-batch gradients are summed in half precision", here))
        if is_half(self.reduce):
            out.append(finding("low-precision-reduce", f"reduce={dtype_name(self.reduce)}: gradient collectives round at every hop", here))
        if is_half(self.params) and self.params != self.compute and is_half(self.compute):
            out.append(finding("mixed-half-dtypes", f"params={dtype_name(self.params)} with compute={dtype_name(self.compute)}: bf16 and fp16 meet in one graph", here))
        if is_half(self.params):
            out.append(finding("pure-bf16-optimizer", f"params={dtype_name(self.params)}: updates below ~1/256 of a weight round away unless the optimizer keeps fp32 master weights, Kahan sums or rounds stochastically", here))
        if is_half(self.optimizer_state):
            out.append(finding("low-precision-optimizer-state", f"optimizer_state={dtype_name(self.optimizer_state)}: Adam moments lose small updates", here))
        if device is not None and torch.bfloat16 in (self.params, self.compute):
            from ampdoctor.hardware import bf16_support

            support = bf16_support(device)
            if not support.native:
                out.append(finding("bf16-unsupported-hardware", f"bf16 requested on {support.device}: {support.reason}", here))
        return out

    # --- wiring -------------------------------------------------------------------------------------

    def autocast(self, device_type: str = "cuda") -> ContextManager[Any]:
        """`torch.autocast` to the compute dtype; with fp32/fp64 compute, autocast disabled (also an ambient one)."""
        if self.compute in (torch.float32, torch.float64):
            return torch.autocast(device_type=device_type, enabled=False)
        return torch.autocast(device_type=device_type, dtype=self.compute)

    def grad_scaler(self, device_type: str = "cuda") -> "GradScaler | None":
        """A GradScaler only when the policy asks for loss scaling with fp16 compute; None otherwise (bf16 never needs one)."""
        if self.loss_scale == "none" or self.compute != torch.float16:
            return None
        from torch.amp import GradScaler

        if self.loss_scale == "static":
            # torch's GradScaler cannot hold its scale fixed (backoff_factor must be < 1): "static" here
            # never grows the scale, and still halves it on an overflow rather than training on infs.
            return GradScaler(device_type, growth_interval=2**31 - 1)
        return GradScaler(device_type)

    # --- framework configs (ampdoctor.frameworks) ----------------------------------------------------

    def to_deepspeed(self) -> dict[str, Any]:
        from ampdoctor.frameworks import export; return export(self, "deepspeed").config  # noqa: E702

    def to_accelerate(self) -> dict[str, Any]:
        from ampdoctor.frameworks import export; return export(self, "accelerate").config  # noqa: E702

    def to_hf(self) -> dict[str, Any]:
        from ampdoctor.frameworks import export; return export(self, "hf").config  # noqa: E702

    def to_lightning(self) -> dict[str, Any]:
        from ampdoctor.frameworks import export; return export(self, "lightning").config  # noqa: E702

    def to_neox(self) -> dict[str, Any]:
        from ampdoctor.frameworks import export; return export(self, "neox").config  # noqa: E702

    def to_torchtune(self) -> dict[str, Any]:
        from ampdoctor.frameworks import export; return export(self, "torchtune").config  # noqa: E702

    def to_fsdp(self) -> Any:
        """An FSDP2 `MixedPrecisionPolicy` (FSDP1 `MixedPrecision` on older torch)."""
        from ampdoctor.frameworks import export; return export(self, "fsdp").config  # noqa: E702

    @classmethod
    def from_config(cls, framework: str, config: Any) -> "Policy | None":
        """The effective policy of a framework config (a dict or a path); None when it is left to "auto"."""
        from ampdoctor.frameworks import from_config; return from_config(framework, config)  # noqa: E702


PRESETS: dict[str, Policy] = {
    "fp32": Policy.derive(params=torch.float32),
    "bf16-mixed": Policy.derive(params=torch.float32, compute=torch.bfloat16),
    "bf16-true": Policy.derive(
        params=torch.bfloat16, grad_accum=torch.bfloat16, reduce=torch.bfloat16, optimizer_state=torch.bfloat16
    ),
    "fp16-mixed": Policy.derive(params=torch.float32, compute=torch.float16),
    "fp16-true": Policy.derive(
        params=torch.float16, grad_accum=torch.float16, reduce=torch.float16, optimizer_state=torch.float16, loss_scale="none"
    ),
}

# Lightning's precision strings and common spellings.
_PRESET_ALIASES = {
    "32": "fp32", "32-true": "fp32", "float32": "fp32",
    "bf16": "bf16-mixed", "bf16-mixed": "bf16-mixed", "bfloat16": "bf16-mixed",
    "16": "fp16-mixed", "16-mixed": "fp16-mixed", "fp16": "fp16-mixed",
    "16-true": "fp16-true", "bf16-true": "bf16-true",
}
