"""One module per framework, each ending with its `Reader` (`ampdoctor.frameworks.reader`): its config -> `Reading`
(the effective `Policy`, the `RunFacts` and where each was decided), and `Policy` -> its config
(`export(policy, "deepspeed")`). `located` is the shared parser that keeps line/column per key path.

Adding a framework is one module that ends with ``READER = Reader(...)`` and one line in `READERS` below:
detection, lint, reference following, export and `from_config` all go through the registry."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import yaml

from ampdoctor.frameworks import (
    accelerate,
    composer,
    deepspeed,
    fsdp,
    h2o,
    hf,
    launchers,
    lightning,
    neox,
    simpletuner,
    torchtitan,
    torchtune,
)
from ampdoctor.frameworks.base import Reading, Reference, Setting
from ampdoctor.frameworks.launchers import Device, hardware_in
from ampdoctor.frameworks.located import Document, load_documents
from ampdoctor.frameworks.reader import Reader
from ampdoctor.policy import Policy
from ampdoctor.report import ReportError

# The registry. Detection order: the most specific shapes first (a NeoX file also holds DeepSpeed blocks; HF
# arguments are loosest; launcher files only name hardware). FSDP is configured in code: export only.
READERS: tuple[Reader, ...] = (
    neox.READER,
    deepspeed.READER,
    accelerate.READER,
    lightning.READER,
    h2o.READER,
    torchtune.READER,
    torchtitan.READER,
    composer.READER,
    simpletuner.READER,
    hf.READER,
    launchers.READER,
    fsdp.READER,
)

TARGETS: tuple[str, ...] = tuple(r.target for r in READERS if r.export is not None)


def reader_for(doc: Document) -> Reader | None:
    """The reader whose framework's config this document is, or None for a file that is no training config."""
    return next((r for r in READERS if r.recognises(doc)), None)


def reader_named(name: str) -> Reader | None:
    """The reader a `Reference` or a caller names, by its name or its `export --to` key."""
    key = name.strip().lower()
    return next((r for r in READERS if key in (r.name, r.target)), None)


def devices_named_in(doc: Document) -> list[Device]:
    """GPUs or cloud instances a config names, whatever its framework (a launcher file, a job spec)."""
    return hardware_in(doc)


@dataclass(frozen=True)
class Export:
    """A framework config fragment for a policy: `config` (a dict, or for a framework configured in code the object,
    None where torch is not installed), `text` in the framework's own syntax, and what the framework cannot express."""

    target: str
    config: Any
    text: str
    cannot_express: tuple[str, ...]
    syntax: str


def export(policy: Policy, target: str, *, build: bool = True) -> Export:
    """The fragment for `target`. For a framework configured by an object in code, `build=False` leaves `config` None:
    building it imports torch (seconds), which a caller that only prints the text (the CLI) does not need."""
    reader = reader_named(target)
    if reader is None or reader.export is None:
        raise ValueError(f"unknown export target {target!r}: expected one of {', '.join(TARGETS)}")
    if reader.build is not None:
        # Configured by an object in code: the exporter writes the code; the object needs torch.
        text, notes = reader.export(policy)
        config = reader.build(policy) if build and importlib.util.find_spec("torch") is not None else None
        return Export(reader.target, config, text, tuple(notes), reader.syntax)
    config, notes = reader.export(policy)
    notes = notes + _unexpressed(policy, reader.target, config, notes)
    return Export(reader.target, config, _dumped(config, reader.syntax), tuple(notes), reader.syntax)


def _dumped(config: Any, syntax: str) -> str:
    if syntax == "json":
        return json.dumps(config, indent=2) + "\n"
    if syntax == "toml":
        return _toml_text(config)
    return yaml.safe_dump(config, sort_keys=False)


def _toml_text(config: dict[str, Any]) -> str:
    """A two-level TOML document ([section] tables of scalars), as the TOML job configs that are exported are."""
    lines: list[str] = []
    for section, values in config.items():
        lines.append(f"[{section}]")
        lines.extend(f"{key} = {json.dumps(value)}" for key, value in values.items())
        lines.append("")
    return "\n".join(lines)


def _unexpressed(policy: Policy, target: str, config: Any, notes: list[str]) -> list[str]:
    """Fields the fragment does not reproduce when read back, that the exporter did not already explain:
    the reader is the reference for what the framework runs, so an export can never claim more than it does."""
    back = from_config(target, config)
    if back is None:
        return ["the fragment leaves the precision to 'auto'"]
    out = []
    for f in fields(Policy):
        want, got = getattr(policy, f.name), getattr(back, f.name)
        if want != got and not any(n.startswith(f"{f.name}=") for n in notes):
            out.append(f"{f.name}={want}: {target} runs {got} here")
    return out


def from_config(target: str, config: Any, *, file: str = "<config>") -> Policy | None:
    """The effective policy of a config given as data (a dict) or a path; None when it is left to "auto"."""
    reader = reader_named(target)
    if reader is not None and reader.policy_of is not None:
        return reader.policy_of(config)
    if reader is None or reader.read is None:
        raise ValueError(f"unknown framework {target!r}")
    if isinstance(config, (str, Path)):
        docs, error = load_documents(Path(config))
        if error is not None:
            raise ValueError(str(error))
        if not docs:
            raise ValueError(f"{config}: no document")
        doc = docs[0]
    else:
        doc = Document(file, "yaml", config, {})
    errors: list[ReportError] = []
    readings = reader.read_all([doc], errors)
    if errors or not readings:
        raise ValueError(errors[0].message if errors else f"{doc.file}: no {reader.title} config")
    return readings[0].policy


__all__ = ["Document", "Reading", "Export", "READERS", "Reader", "Reference", "Setting", "TARGETS", "devices_named_in", "export",
           "from_config", "reader_for", "reader_named"]
