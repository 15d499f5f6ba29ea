"""`ampdoctor lint` for training configs: parse each candidate file with its location map, recognise the
framework by content (files that are no training config are skipped silently), work out the effective
precision per configuration (merging NeoX files, SimpleTuner env+json, and following references from
accelerate/HF/Lightning to DeepSpeed files), then run the checks and collect findings and input errors."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any, Iterable

from ampdoctor.frameworks import neox, reader_for, simpletuner
from ampdoctor.frameworks import deepspeed as ds
from ampdoctor.frameworks.base import EffectiveConfig, Reference, is_auto
from ampdoctor.frameworks.launchers import Hardware, hardware_in
from ampdoctor.frameworks.located import Document, load_documents
from ampdoctor.lint.config_checks import check_config, check_hardware
from ampdoctor.report import InputError, Report
from ampdoctor.rules import Finding, finding

_ENGINE_TO_ASKED = {"bf16": "bf16", "fp16": "fp16", "amp": "fp16", "fp32": "no"}


def lint_config_files(files: list[Path]) -> Report:
    """Lint config files; never raises on bad input (it becomes an `InputError`)."""
    errors: list[InputError] = []
    recognised: list[tuple[Document, ModuleType]] = []
    loaded: dict[Path, list[Document]] = {}
    for path in files:
        docs, error = load_documents(path)
        loaded[_key(path)] = docs
        if error is not None:
            errors.append(error)
            continue
        for doc in docs:
            module = reader_for(doc)
            if module is not None:
                recognised.append((doc, module))

    configs: list[EffectiveConfig] = []
    findings: list[Finding] = []
    by_dir: dict[Path, list[tuple[Document, ModuleType]]] = defaultdict(list)
    for doc, module in recognised:
        by_dir[Path(doc.file).parent].append((doc, module))
    for folder, items in by_dir.items():
        configs.extend(_read_folder(items, findings, errors))

    resolved: list[EffectiveConfig] = []
    checked = {doc.file for doc, _ in recognised}
    for cfg in configs:
        for ref in cfg.references:
            target = _follow(cfg, ref, loaded, errors)
            if target is not None:
                resolved.append(target)
                checked.update(target.files)
    configs.extend(resolved)

    for cfg in configs:
        findings.extend(_name_filled_keys(cfg, cfg.findings + check_config(cfg)))
    for folder, items in by_dir.items():
        hardware: list[Hardware] = [hw for doc, _ in items for hw in hardware_in(doc)]
        if hardware:
            near = [c for c in configs if Path(c.file).parent == folder or any(Path(f).parent == folder for f in c.files)]
            findings.extend(check_hardware(near, hardware))
    return Report.of(_unique(findings), checked=tuple(sorted(checked)), errors=tuple(errors))


def _key(path: Path) -> Path:
    try:
        return path.resolve()
    except OSError:
        return path


def _read_folder(items: list[tuple[Document, ModuleType]], findings: list[Finding], errors: list[InputError]) -> list[EffectiveConfig]:
    """Read the configs of one folder; NeoX files and SimpleTuner env/json files are merged as their tools merge them."""
    out: list[EffectiveConfig] = []
    neox_docs = [doc for doc, m in items if m is neox]
    if neox_docs:
        models = [d for d in neox_docs if neox.is_model_file(d)]
        partials = [d for d in neox_docs if not neox.is_model_file(d)]
        groups = [partials + [m] for m in models] if models else [partials]
        for group in groups:
            merged = neox.merge(group)
            merged.file = group[-1].file
            out.append(_safe_read(neox, merged, errors))
    tuner_docs = [doc for doc, m in items if m is simpletuner]
    if tuner_docs:
        out.append(_read_simpletuner(tuner_docs, findings, errors))
    for doc, module in items:
        if module not in (neox, simpletuner):
            out.append(_safe_read(module, doc, errors))
    return [c for c in out if c is not None]


def _safe_read(module: ModuleType, doc: Document, errors: list[InputError]) -> EffectiveConfig | None:
    try:
        return module.read(doc)
    except (TypeError, ValueError, AttributeError, KeyError, IndexError, RecursionError) as exc:
        # A value of a shape the framework itself would reject (a list where a number goes...).
        errors.append(InputError(doc.file, f"cannot interpret this {module.NAME} config: {type(exc).__name__}: {exc}", fatal=False))
        return None


def _read_simpletuner(docs: list[Document], findings: list[Finding], errors: list[InputError]) -> EffectiveConfig:
    """config.env and config.json of one SimpleTuner run: one set of options; conflicting precisions are reported."""
    opts: dict[str, tuple[Any, Any]] = {}
    for doc in sorted(docs, key=lambda d: d.syntax != "env"):
        for name, (value, loc) in simpletuner.flags(doc).items():
            if name == "mixed_precision" and name in opts and str(opts[name][0]).lower() != str(value).lower() and opts[name][1].file != loc.file:
                findings.append(finding(
                    "precision-config-mismatch",
                    f"mixed_precision={value!r} here but {opts[name][0]!r} in {opts[name][1].file}: SimpleTuner reads one of them "
                    "(CONFIG_BACKEND), so the run's weight dtype depends on which",
                    loc, related=[opts[name][1]]))
            opts[name] = (value, loc)
    cfg = simpletuner.read_flags(opts, docs[0].file)
    cfg.files = tuple(sorted({d.file for d in docs}))
    return cfg


def _follow(cfg: EffectiveConfig, ref: Reference, loaded: dict[Path, list[Document]], errors: list[InputError]) -> EffectiveConfig | None:
    """Read the DeepSpeed config `ref` points at, as the pointing framework fills it in, and compare precisions."""
    if ref.inline is not None:
        doc: Document = ref.inline
    else:
        docs = loaded.get(_key(ref.path))
        if docs is None:
            if not ref.path.is_file():
                errors.append(InputError(ref.location.file or cfg.file, f"referenced DeepSpeed config {str(ref.path)!r} not found",
                                         ref.location.line, ref.location.column))
                return None
            docs, error = load_documents(ref.path)
            loaded[_key(ref.path)] = docs
            if error is not None:
                errors.append(error)
                return None
        if not docs or not isinstance(docs[0].data, dict):
            if docs:
                errors.append(InputError(str(ref.path), "referenced DeepSpeed config is not a JSON object", fatal=True))
            return None
        doc = docs[0]
    explicit = ds.precision_mode(doc)
    fills = {}
    for path, value in ref.fills.items():
        if path[0] in ("bf16", "fp16") and explicit.name not in (None, "fp32"):
            continue  # an explicit half mode is never overridden: the launcher refuses or defers (compared below)
        current = doc.get(*path, default=None)
        if current is None or is_auto(current) or not doc.has(path[0]):
            fills[path] = value
    filled = doc.with_overrides(fills)
    target = ds.read(filled)
    target.filled_from = {(loc.file, loc.line): doc.at(*path) for path, (_, loc) in fills.items()}
    target.framework = f"{ref.framework}+deepspeed"
    target.facts = {**cfg.facts, **{k: v for k, v in target.facts.items() if not v.default or k not in cfg.facts}}
    target.files = tuple(sorted({cfg.file, doc.file}))
    asked = ref.precision.value if ref.precision is not None else None
    runs = _ENGINE_TO_ASKED.get(explicit.name or "")
    if asked in ("bf16", "fp16", "no") and runs is not None and asked != runs:
        assert ref.precision is not None
        target.findings.append(finding(
            "precision-config-mismatch",
            f"{ref.framework} asks for {_spell(asked)} but the DeepSpeed config {doc.file} it points to runs {_spell(runs)}"
            + (f" ({ref.framework} refuses the opposite half type)" if {asked, runs} == {"bf16", "fp16"} else
               ": the engine's dtype, not the launcher's, is what the model gets"),
            ref.precision.location if not ref.precision.default else ref.location,
            related=[explicit.location, ref.location]))
    return target


def _name_filled_keys(cfg: EffectiveConfig, found: list[Finding]) -> list[Finding]:
    """A finding at a launcher key that filled a DeepSpeed "auto" also names that DeepSpeed key."""
    if not cfg.filled_from:
        return found
    out = []
    for f in found:
        extra = [cfg.filled_from[(loc.file, loc.line)] for loc in (f.location, *f.related) if (loc.file, loc.line) in cfg.filled_from]
        extra = [loc for loc in extra if loc not in f.related and loc != f.location]
        out.append(replace(f, related=f.related + tuple(dict.fromkeys(extra))) if extra else f)
    return out


def _spell(mode: str) -> str:
    return {"no": "fp32 (no mixed precision)", "bf16": "bf16", "fp16": "fp16"}[mode]


def _unique(findings: Iterable[Finding]) -> list[Finding]:
    seen: set[tuple[Any, ...]] = set()
    out: list[Finding] = []
    for f in findings:
        key = (f.rule_id, f.location.file, f.location.line, f.location.column)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out
