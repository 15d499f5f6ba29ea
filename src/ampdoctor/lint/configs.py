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

from ampdoctor._quote import quoted
from ampdoctor.facts import Conflict
from ampdoctor.frameworks import deepspeed as ds
from ampdoctor.frameworks import neox, reader_for, simpletuner
from ampdoctor.frameworks.base import Reading, Reference, Setting, is_auto
from ampdoctor.frameworks.launchers import hardware_in
from ampdoctor.frameworks.located import Document, load_documents
from ampdoctor.report import Report, ReportError
from ampdoctor.rules.engine import check_policy
from ampdoctor.rules.model import Finding

# DeepSpeed engine mode -> the launcher precision that asks for it.
_ENGINE_TO_ASKED = {"bf16": "bf16", "fp16": "fp16", "amp": "fp16", "fp32": "no"}


def lint_config_files(files: list[Path]) -> Report:
    """Lint config files; never raises on bad input (it becomes a `ReportError`)."""
    return lint_readings(*read_configs(files))


def lint_documents(docs: list[Document], reader: ModuleType | None = None) -> Report:
    """Lint configs given as data (a trainer's live arguments), as `lint_config_files` lints files: each document
    read by `reader` (else by the framework it is recognised as), the DeepSpeed files it points at followed."""
    return lint_readings(*read_documents(docs, reader))


def read_documents(docs: list[Document], reader: ModuleType | None = None) -> tuple[list[Reading], tuple[str, ...], list[ReportError]]:
    """`read_configs` for documents given as data: the readings `lint_documents` judges, for a caller that adds what
    only the running program knows (a live GradScaler) before `lint_readings` judges them."""
    errors: list[ReportError] = []
    recognised = [(doc, module) for doc in docs if (module := reader or reader_for(doc)) is not None]
    return _read_recognised(recognised, {}, errors, set())


def lint_readings(readings: list[Reading], checked: tuple[str, ...], errors: list[ReportError]) -> Report:
    """The findings of the rules over readings, with the inputs that could not be read."""
    findings: list[Finding] = []
    for cfg in readings:
        findings.extend(_name_filled_keys(cfg, check_policy(cfg.policy, cfg.facts, cfg.locate())))
        errors.extend(ReportError(loc.file or cfg.file, message, loc.line, loc.column, fatal=False) for loc, message in cfg.invalid)
    return Report.of(_unique(findings), checked=checked, errors=tuple(dict.fromkeys(errors)))


def read_configs(files: list[Path]) -> tuple[list[Reading], tuple[str, ...], list[ReportError]]:
    """Every training configuration in `files` as its framework runs it (NeoX files and SimpleTuner env/json merged,
    references to DeepSpeed files followed, devices named in a folder added), the files read, and what could not be."""
    errors: list[ReportError] = []
    recognised: list[tuple[Document, ModuleType]] = []
    loaded: dict[Path, list[Document]] = {}
    unreadable: set[str] = set()
    for path in files:
        docs, error = load_documents(path)
        loaded[_key(path)] = docs
        if error is not None:
            # Reported, but the rest of the tree still decides the exit code (one upstream JSON with a trailing
            # comma must not fail a 1,500-file lint); a run where nothing could be read exits 2 all the same.
            errors.append(replace(error, fatal=False))
            unreadable.add(error.file)
            continue
        for doc in docs:
            module = reader_for(doc)
            if module is not None:
                recognised.append((doc, module))
    return _read_recognised(recognised, loaded, errors, unreadable)


def _read_recognised(recognised: list[tuple[Document, ModuleType]], loaded: dict[Path, list[Document]], errors: list[ReportError],
                     unreadable: set[str]) -> tuple[list[Reading], tuple[str, ...], list[ReportError]]:
    by_dir: dict[Path, list[tuple[Document, ModuleType]]] = defaultdict(list)
    for doc, module in recognised:
        by_dir[Path(doc.file).parent].append((doc, module))
    readings: list[Reading] = []
    for items in by_dir.values():
        readings.extend(_read_folder(items, errors))

    checked = {doc.file for doc, _ in recognised} | unreadable
    followed: list[Reading] = []
    for cfg in readings:
        for ref in cfg.references:
            target = _follow(cfg, ref, loaded, errors)
            if target is not None:
                followed.append(target)
                checked.update(target.files)
    # A file that a launcher or trainer config refers to runs as that config fills it in: reading it alone as
    # well would judge it without those settings and contradict the followed reading.
    referenced = {target.file for target in followed}
    readings = [cfg for cfg in readings if cfg.file not in referenced] + followed
    _add_devices(readings, by_dir)
    return readings, tuple(sorted(checked)), errors


def _key(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError, ValueError):
        return path


def _read_folder(items: list[tuple[Document, ModuleType]], errors: list[ReportError]) -> list[Reading]:
    """Read the configs of one folder; NeoX files and SimpleTuner env/json files are merged as their tools merge them."""
    out: list[Reading | None] = []
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
        out.append(_read_simpletuner(tuner_docs))
    for doc, module in items:
        if module not in (neox, simpletuner):
            out.append(_safe_read(module, doc, errors))
    return [c for c in out if c is not None]


def _safe_read(module: ModuleType, doc: Document, errors: list[ReportError]) -> Reading | None:
    try:
        return module.read(doc)
    except (TypeError, ValueError, AttributeError, KeyError, IndexError, RecursionError) as exc:
        # A value of a shape the framework itself would reject (a list where a number goes...).
        errors.append(ReportError(doc.file, f"cannot interpret this {module.NAME} config: {type(exc).__name__}: {exc}", fatal=False))
        return None


def _read_simpletuner(docs: list[Document]) -> Reading:
    """config.env and config.json of one SimpleTuner run are one set of options; a precision given differently
    in two of them is a conflict (which one SimpleTuner reads depends on CONFIG_BACKEND)."""
    opts: dict[str, tuple[Any, Any]] = {}
    conflicts: list[Conflict] = []
    for doc in sorted(docs, key=lambda d: d.syntax != "env"):
        for name, (value, loc) in simpletuner.flags(doc).items():
            earlier = opts.get(name)
            if name == "mixed_precision" and earlier is not None and str(earlier[0]).lower() != str(value).lower() and earlier[1].file != loc.file:
                conflicts.append(Conflict(name, (str(value), str(earlier[0])), (loc, earlier[1])))
            opts[name] = (value, loc)
    cfg = simpletuner.read_flags(opts, docs[0].file)
    cfg.files = tuple(sorted({d.file for d in docs}))
    if conflicts:
        cfg.set("conflicts", tuple(conflicts), conflicts[0].where[0])
    return cfg


def _reference_document(cfg: Reading, ref: Reference, loaded: dict[Path, list[Document]], errors: list[ReportError]) -> Document | None:
    if ref.inline is not None:
        return ref.inline
    docs = loaded.get(_key(ref.path))
    if docs is None:
        if not _is_file(ref.path):
            errors.append(ReportError(ref.location.file or cfg.file, f"referenced DeepSpeed config {quoted(str(ref.path))} not found",
                                      ref.location.line, ref.location.column, fatal=False))
            return None
        docs, error = load_documents(ref.path)
        loaded[_key(ref.path)] = docs
        if error is not None:
            errors.append(error)
            return None
    if not docs or not isinstance(docs[0].data, dict):
        if docs:
            errors.append(ReportError(str(ref.path), "referenced DeepSpeed config is not a JSON object", fatal=False))
        return None
    return docs[0]


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def _follow(cfg: Reading, ref: Reference, loaded: dict[Path, list[Document]], errors: list[ReportError]) -> Reading | None:
    """Read the DeepSpeed config `ref` points at, as the pointing framework fills it in, with what the pointing
    config asks of it (`requested_precision`)."""
    doc = _reference_document(cfg, ref, loaded, errors)
    if doc is None:
        return None
    explicit = ds.precision_mode(doc)
    fills = {}
    for path, value in ref.fills.items():
        if path[0] in ("bf16", "fp16") and explicit.name not in (None, "fp32"):
            continue  # an explicit half mode is never overridden: the launcher refuses or defers (a rule compares)
        current = doc.get(*path, default=None)
        if current is None or is_auto(current) or not doc.has(path[0]):
            fills[path] = value
    target = ds.read(doc.with_overrides(fills))
    target.filled_from = {(loc.file, loc.line): doc.at(*path) for path, (_, loc) in fills.items()}
    target.framework = f"{ref.framework}+deepspeed"
    target.files = tuple(sorted({cfg.file, doc.file}))
    # The pointing config's facts, completed (not overridden) by the engine's own.
    target.settings = {**cfg.settings, **{k: v for k, v in target.settings.items() if not v.default or k not in cfg.settings}}
    target.places = {**cfg.places, **target.places, "reference": ref.location, "engine_file": explicit.location}
    asked = ref.precision
    # A file without precision blocks gets them from the launcher (accelerate adds the missing block), so only a
    # written block can disagree with what the launcher asks.
    written = any(doc.has(block) for block in ("fp16", "bf16", "bfloat16", "amp"))
    if asked is not None and asked.value in ("bf16", "fp16", "no") and written and explicit.name in _ENGINE_TO_ASKED:
        target.settings["requested_precision"] = Setting(asked.value, asked.location if not asked.default else ref.location, asked.default)
    return target


def _add_devices(readings: list[Reading], by_dir: dict[Path, list[tuple[Document, ModuleType]]]) -> None:
    """GPUs named by any file of a folder are the devices of the configs of that folder."""
    for folder, items in by_dir.items():
        devices = tuple(hw for doc, _ in items for hw in hardware_in(doc))
        if not devices:
            continue
        for cfg in readings:
            if Path(cfg.file).parent == folder or any(Path(f).parent == folder for f in cfg.files):
                cfg.set("devices", devices, devices[0].location or cfg.locate().default)


def _name_filled_keys(cfg: Reading, found: list[Finding]) -> list[Finding]:
    """A finding at a launcher key that filled a DeepSpeed "auto" also names that DeepSpeed key."""
    if not cfg.filled_from:
        return found
    out = []
    for f in found:
        extra = [cfg.filled_from[(loc.file, loc.line)] for loc in (f.location, *f.related) if (loc.file, loc.line) in cfg.filled_from]
        extra = [loc for loc in extra if loc not in f.related and loc != f.location]
        out.append(replace(f, related=f.related + tuple(dict.fromkeys(extra))) if extra else f)
    return out


def _unique(findings: Iterable[Finding]) -> list[Finding]:
    seen: set[tuple[Any, ...]] = set()
    out: list[Finding] = []
    for f in findings:
        key = (f.rule_id, f.location.file, f.location.line, f.location.column)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out
