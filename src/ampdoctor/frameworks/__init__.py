"""One module per framework: its config -> `Reading` (the effective `Policy`, the `RunFacts` and where each
was decided), and `Policy` -> its config (`export(policy, "deepspeed")`). `located` is the shared parser
that keeps line/column per key path. Adding a framework is one module with `NAME`, `detect`, `read` and,
where the framework can be configured for a policy, `export`, listed in `READERS` (and `_EXPORTERS`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from ampdoctor.frameworks import accelerate, deepspeed, fsdp, h2o, hf, launchers, lightning, neox, simpletuner, torchtune
from ampdoctor.frameworks.base import Reading, Reference, Setting
from ampdoctor.frameworks.located import Document, load_documents
from ampdoctor.policy import Policy

# Detection order: the most specific shapes first (a NeoX file also holds DeepSpeed blocks; HF arguments are loosest).
READERS: tuple[ModuleType, ...] = (neox, deepspeed, accelerate, lightning, h2o, torchtune, simpletuner, hf, launchers)

TARGETS = ("deepspeed", "accelerate", "hf", "lightning", "fsdp", "neox", "torchtune")
_EXPORTERS: dict[str, ModuleType] = {"deepspeed": deepspeed, "accelerate": accelerate, "hf": hf, "lightning": lightning,
                                     "fsdp": fsdp, "neox": neox, "torchtune": torchtune}
_FORMAT = {"deepspeed": "json", "hf": "json", "fsdp": "python", "accelerate": "yaml", "lightning": "yaml", "neox": "yaml", "torchtune": "yaml"}


def reader_for(doc: Document) -> ModuleType | None:
    """The framework module whose config this document is, or None for a file that is no training config."""
    for module in READERS:
        try:
            if module.detect(doc):
                return module
        except (TypeError, AttributeError, ValueError):
            continue
    return None


@dataclass(frozen=True)
class Export:
    """A framework config fragment for a policy: `config` (a dict, or for FSDP the `MixedPrecisionPolicy` object,
    None where torch is not installed), `text` in the framework's own syntax, and what the framework cannot express."""

    target: str
    config: Any
    text: str
    cannot_express: tuple[str, ...]
    syntax: str


def export(policy: Policy, target: str) -> Export:
    key = target.strip().lower()
    if key not in _EXPORTERS:
        raise ValueError(f"unknown export target {target!r}: expected one of {', '.join(TARGETS)}")
    if key == "fsdp":
        import importlib.util

        text, notes = fsdp.export(policy)
        config = fsdp.to_fsdp(policy) if importlib.util.find_spec("torch") is not None else None
        return Export(key, config, text, tuple(notes), "python")
    config, notes = _EXPORTERS[key].export(policy)
    notes = notes + _unexpressed(policy, key, config, notes)
    if _FORMAT[key] == "json":
        text = json.dumps(config, indent=2) + "\n"
    else:
        text = yaml.safe_dump(config, sort_keys=False)
    return Export(key, config, text, tuple(notes), _FORMAT[key])


def _unexpressed(policy: Policy, target: str, config: Any, notes: list[str]) -> list[str]:
    """Fields the fragment does not reproduce when read back, that the exporter did not already explain:
    the reader is the reference for what the framework runs, so an export can never claim more than it does."""
    from dataclasses import fields

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
    key = target.strip().lower()
    if key == "fsdp":
        return fsdp.from_fsdp(config)
    if isinstance(config, (str, Path)):
        docs, error = load_documents(Path(config))
        if error is not None:
            raise ValueError(str(error))
        if not docs:
            raise ValueError(f"{config}: no document")
        doc = docs[0]
    else:
        doc = Document(file, "yaml", config, {})
    if key == "neox":
        doc = neox.merge([doc])
    module = {"deepspeed": deepspeed, "accelerate": accelerate, "hf": hf, "lightning": lightning, "neox": neox,
              "torchtune": torchtune, "simpletuner": simpletuner, "h2o": h2o}.get(key)
    if module is None:
        raise ValueError(f"unknown framework {target!r}")
    return module.read(doc).policy


__all__ = ["Document", "Reading", "Export", "READERS", "Reference", "Setting", "TARGETS", "export", "from_config", "reader_for"]
