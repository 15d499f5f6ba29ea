"""What every framework reader returns, and the helpers readers share.

A reader turns a document into a `Reading`: the effective `Policy` the framework will run with, the
`RunFacts` it implies (accumulation steps, world size, engine mode...) and where each was decided. Readers
emit no findings: every config finding comes from the registered rules (`ampdoctor.rules`), which ask the
reading's policy and facts the same questions `Policy.validate()` and the audit ask.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from ampdoctor import dtypes
from ampdoctor.core.engine import Places
from ampdoctor.core.model import Location
from ampdoctor.facts import FACT_NAMES, RunFacts
from ampdoctor.frameworks.located import Document
from ampdoctor.policy import Policy

AUTO = "auto"
# The longest config value used as a file path: longer text (an inline or base64 config) is no path.
MAX_PATH_CHARS = 4096


@dataclass(frozen=True)
class Setting:
    """A value the framework uses and where it comes from; `default` marks a framework default that no key set."""

    value: Any
    location: Location
    default: bool = False


@dataclass(frozen=True)
class Reference:
    """Another config file this one points at (accelerate's `deepspeed_config_file`, HF's `deepspeed`), and which
    reader reads it."""

    path: Path
    location: Location
    # Values the pointing config fills in for DeepSpeed "auto" keys, by DeepSpeed key path.
    fills: Mapping[tuple[str, ...], tuple[Any, Location]] = field(default_factory=dict)
    # The precision the pointing config asks for explicitly ("bf16", "fp16", "no"); None when it leaves it to the file.
    precision: Setting | None = None
    framework: str = ""
    # A DeepSpeed config written inline (HF `"deepspeed": {...}`) instead of in a file.
    inline: Document | None = None
    # The reader (by name) that reads the referenced file as this config fills it in: `Reader.read_referenced`.
    reader: str = "deepspeed"


# Strategies (`RunFacts.strategy`) whose engine steps fp32 master partitions in each of its half modes: a launch
# config that hands a run to one decides that the run has a master copy even where the engine's precision is left to
# the run it starts (`lint.configs._launched_with_masters`).
ENGINES_WITH_MASTERS = frozenset({"deepspeed"})


def resolve_path(doc_file: str, value: str) -> list[Path]:
    """Where a referenced file may be: next to the referencing config, in its parent folders (launch
    scripts often run from the repository root), then relative to the working directory."""
    given = Path(value).expanduser()
    if given.is_absolute():
        return [given]
    here = Path(doc_file).parent
    return [here / given] + [parent / given for parent in list(here.parents)[:4]] + [Path.cwd() / given]


def first_file(paths: list[Path]) -> Path:
    """The first of `paths` that is a regular file, else the first; never raises on odd paths."""
    for path in paths:
        try:
            if path.is_file():
                return path
        except (OSError, ValueError):
            continue
    return paths[0]


def checkout_says(config_file: str, code: tuple[Path, ...], label: str, new: Callable[[str], bool],
                  old: Callable[[str], bool], levels: int = 6) -> tuple[bool | None, Location | None]:
    """What the framework checkout a config lives in does, read from its source (`checkout_source`): True where the
    text shows the newer behaviour (`new`), False where it shows the older one (`old`), and (None, None) where it
    shows neither or there is no checkout: the version is unknown, never taken for old."""
    found = checkout_source(config_file, code, levels)
    if found is None:
        return None, None
    text, where = found
    said = True if new(text) else False if old(text) else None
    return (said, Location(file=where.file, label=label)) if said is not None else (None, None)


def checkout_source(config_file: str, candidates: tuple[Path, ...], levels: int = 6) -> tuple[str, Location] | None:
    """The text of the framework's own source file that decides how a config is read, when the config lives inside a
    checkout of that framework (the first of `candidates`, relative to the config's folder or one of its parents):
    the framework's version is what that code does. None outside a checkout (the version is unknown)."""
    folder = Path(config_file).parent
    for parent in [folder, *folder.parents][:levels]:
        for relative in candidates:
            source = parent / relative
            try:
                if source.is_file():
                    return source.read_text(encoding="utf-8", errors="replace")[:2_000_000], Location(file=str(source), label="framework source")
            except OSError:
                return None
    return None


def as_path_value(value: Any) -> str | None:
    """A config value usable as a file path, or None (not a string, empty, a NUL byte, absurdly long)."""
    if not isinstance(value, str) or not value.strip() or "\x00" in value or len(value) > MAX_PATH_CHARS:
        return None
    return value.strip()


@dataclass
class Reading:
    """One training configuration as its framework will run it: built by a reader, then asked by the rules."""

    framework: str
    file: str
    policy: Policy | None = None  # None when the precision is left to something not in the file ("auto")
    sources: dict[str, Location] = field(default_factory=dict)  # Policy field -> the key that decided it
    settings: dict[str, Setting] = field(default_factory=dict)  # RunFacts field -> value and key
    places: dict[str, Location] = field(default_factory=dict)  # other named places rules point at ("bf16_mode")
    references: list[Reference] = field(default_factory=list)
    files: tuple[str, ...] = ()  # every file read (several for a merged NeoX config)
    # For a DeepSpeed file filled in by its launcher: (file, line) of the launcher's key -> the DeepSpeed key it
    # filled, so a finding located at one names the other too.
    filled_from: dict[tuple[str | None, int | None], Location] = field(default_factory=dict)
    # Values of a type the framework rejects ("four" micro-batches, a dtype it does not know): reported as input
    # errors at their key, never silently taken for a default.
    invalid: list[tuple[Location, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.files:
            self.files = (self.file,)

    def fact(self, name: str, default: Any = None) -> Any:
        setting = self.settings.get(name)
        return default if setting is None else setting.value

    def set(self, name: str, value: Any, location: Location, default: bool = False) -> None:
        if name not in FACT_NAMES:
            raise KeyError(f"{name!r} is not a RunFacts field")
        self.settings[name] = Setting(value, location, default)

    def place(self, name: str, location: Location) -> None:
        self.places[name] = location

    @property
    def facts(self) -> RunFacts:
        return RunFacts(framework=self.framework, **{k: s.value for k, s in self.settings.items() if k != "framework"})

    def locate(self) -> Places:
        locations = {**self.places, **self.sources, **{k: s.location for k, s in self.settings.items()}}
        return Places(locations, Location(file=self.file))


class PolicyBuilder:
    """Collects the dtypes a config decides, with the key that decided each, then derives the rest."""

    def __init__(self, default_location: Location) -> None:
        self.given: dict[str, Any] = {}
        self.sources: dict[str, Location] = {}
        self.default_location = default_location

    def set(self, field_name: str, value: Any, location: Location) -> None:
        self.given[field_name] = value
        self.sources[field_name] = location

    def autocast(self, cfg: Reading, half: str, location: Location) -> None:
        """Autocast to `half` over the existing params; frameworks that autocast to fp16 also build a dynamic
        loss scaler (accelerate, HF Trainer and Lightning all do), and never one for bf16."""
        self.set("compute", half, location)
        cfg.set("autocast", True, location)
        if half == dtypes.FP16:
            self.set("loss_scale", "dynamic", location)

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


def as_dtype(value: Any) -> str | None:
    """A dtype name from a config spelling ("bf16", "torch.bfloat16", "float32", 16, "32", "bf16-mixed", "no"...);
    None if the value names no float dtype."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        value = str(value)  # never through float(): a 400-digit int overflows it
    elif isinstance(value, float):
        value = str(int(value)) if value.is_integer() else str(value)
    if not isinstance(value, str):
        return None
    text = value.strip().lower()
    return dtypes.canonical(text) or dtypes.PRECISION_MODES.get(text)


def is_auto(value: Any) -> bool:
    return isinstance(value, str) and value.strip().lower() == AUTO


def lower_str(value: Any) -> str:
    return value.strip().lower() if isinstance(value, str) else ""
