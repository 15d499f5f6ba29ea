"""What every framework reader returns: the effective `Policy` the framework will run with, where each
part of it was decided, and the other facts the config checks need (accumulation steps, world size,
which loss scaler is on...)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import torch

from ampdoctor.frameworks.located import Document
from ampdoctor.policy import Policy, dtype_name, parse_dtype
from ampdoctor.rules import Finding, Location

AUTO = "auto"


@dataclass(frozen=True)
class Setting:
    """A value the framework uses and where it comes from; `default` marks a framework default that no key set."""

    value: Any
    location: Location
    default: bool = False


@dataclass(frozen=True)
class Reference:
    """Another config file this one points at (accelerate's `deepspeed_config_file`, HF's `deepspeed`)."""

    path: Path
    location: Location
    # Values the pointing config fills in for DeepSpeed "auto" keys, by DeepSpeed key path.
    fills: Mapping[tuple[str, ...], tuple[Any, Location]] = field(default_factory=dict)
    # The precision the pointing config asks for ("bf16", "fp16", "no"), to compare with the file's own.
    precision: Setting | None = None
    framework: str = ""
    # A DeepSpeed config written inline (HF `"deepspeed": {...}`) instead of in a file.
    inline: Document | None = None


def resolve_path(doc_file: str, value: str) -> list[Path]:
    """Where a referenced file may be: next to the referencing config, in its parent folders (launch
    scripts often run from the repository root), then relative to the working directory."""
    given = Path(value).expanduser()
    if given.is_absolute():
        return [given]
    here = Path(doc_file).parent
    return [here / given] + [parent / given for parent in list(here.parents)[:4]] + [Path.cwd() / given]


@dataclass
class EffectiveConfig:
    """One training configuration as its framework will run it."""

    framework: str
    file: str
    policy: Policy | None  # None when the precision is left to something not in the file ("auto")
    sources: dict[str, Location] = field(default_factory=dict)  # Policy field -> the key that decided it
    facts: dict[str, Setting] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    references: list[Reference] = field(default_factory=list)
    files: tuple[str, ...] = ()  # every file read (several for a merged NeoX config)
    # For a DeepSpeed file filled in by its launcher: (file, line) of the launcher's key -> the DeepSpeed key it
    # filled, so a finding located at one names the other too.
    filled_from: dict[tuple[str | None, int | None], Location] = field(default_factory=dict)

    def fact(self, name: str, default: Any = None) -> Any:
        setting = self.facts.get(name)
        return default if setting is None else setting.value

    def where(self, name: str) -> Location:
        """Location of a fact or Policy field, falling back to the file."""
        if name in self.facts:
            return self.facts[name].location
        if name in self.sources:
            return self.sources[name]
        return Location(file=self.file)

    def set(self, name: str, value: Any, location: Location, default: bool = False) -> None:
        self.facts[name] = Setting(value, location, default)


class PolicyBuilder:
    """Collects the dtypes a config decides, with the key that decided each, then derives the rest."""

    def __init__(self, default_location: Location) -> None:
        self.given: dict[str, Any] = {}
        self.sources: dict[str, Location] = {}
        self.default_location = default_location

    def set(self, field_name: str, value: Any, location: Location) -> None:
        self.given[field_name] = value
        self.sources[field_name] = location

    def autocast(self, cfg: "EffectiveConfig", half: Any, location: Location) -> None:
        """Autocast to `half` over the existing params; frameworks that autocast to fp16 also build a dynamic
        loss scaler (accelerate, HF Trainer and Lightning all do), and never one for bf16."""
        self.set("compute", half, location)
        cfg.set("autocast", half, location)
        if half == torch.float16:
            self.set("loss_scale", "dynamic", location)
            cfg.set("loss_scaler", "dynamic", location)

    def build(self) -> tuple[Policy, dict[str, Location]]:
        policy = Policy.derive(**self.given)
        sources = dict(self.sources)
        origin = sources.get("compute") or sources.get("params") or self.default_location
        for name in ("params", "compute", "output", "grads", "grad_accum", "reduce", "optimizer_state", "loss_scale"):
            sources.setdefault(name, origin)
        return policy, sources


# --- value helpers: configs spell the same thing many ways ------------------------------------------


def as_bool(value: Any) -> bool | None:
    """true/false from a config value ("true", 1, "yes"...); None when it is not a boolean (e.g. "auto")."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        v = value.strip().lower()
        if v in ("true", "yes", "on", "1", "y"):
            return True
        if v in ("false", "no", "off", "0", "n", "none", ""):
            return False
    return None


def as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    return None


def as_dtype(value: Any) -> torch.dtype | None:
    """A dtype from a config spelling ("bf16", "torch.bfloat16", "float32", 16, "32"...); None if not a float dtype."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        value = str(int(value)) if float(value).is_integer() else str(value)
    if not isinstance(value, str):
        return None
    text = value.strip().lower()
    text = {"no": "fp32", "fp32-true": "fp32", "tf32": "fp32", "amp_bf16": "bf16", "amp_fp16": "fp16"}.get(text, text)
    try:
        return parse_dtype(text)
    except ValueError:
        return None


def is_auto(value: Any) -> bool:
    return isinstance(value, str) and value.strip().lower() == AUTO


def lower_str(value: Any) -> str:
    return value.strip().lower() if isinstance(value, str) else ""


def describe(policy: Policy | None) -> str:
    if policy is None:
        return "unknown (left to another config)"
    return policy.preset_name or str(policy)


def dtype_label(dtype: torch.dtype | None) -> str:
    return dtype_name(dtype) if dtype is not None else "unknown"


Reader = Callable[[Document], EffectiveConfig]
