"""`ampdoctor lint` for training configs: parse each candidate file with its location map, recognise the
framework by content (files that are no training config are skipped silently), work out the effective
precision per configuration (the files of one run read together and references to other configs followed,
each as its framework's `Reader` says), then run the checks and collect findings and input errors. This module
names no framework: what differs between frameworks lives in their readers (`ampdoctor.frameworks`)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable, Mapping

from ampdoctor._quote import quoted
from ampdoctor.core.engine import check_policy
from ampdoctor.core.model import Finding
from ampdoctor.dtypes import FP32
from ampdoctor.frameworks import devices_named_in, reader_for, reader_named
from ampdoctor.frameworks.base import ENGINES_WITH_MASTERS, Reading, Reference
from ampdoctor.frameworks.document import OwnSaid
from ampdoctor.frameworks.located import Document, jsonc_documents, load_documents, read_text
from ampdoctor.frameworks.reader import Reader
from ampdoctor.report import ErrorKind, Report, ReportError


def lint_config_files(files: list[Path]) -> Report:
    """Lint config files; never raises on bad input (it becomes a `ReportError`)."""
    return lint_readings(*read_configs(files))


def lint_documents(docs: list[Document], reader: Reader | None = None) -> Report:
    """Lint configs given as data (a trainer's live arguments), as `lint_config_files` lints files: each document
    read by `reader` (else by the framework it is recognised as), the files it points at followed."""
    return lint_readings(*read_documents(docs, reader))


def read_documents(docs: list[Document], reader: Reader | None = None) -> tuple[list[Reading], tuple[str, ...], list[ReportError]]:
    """`read_configs` for documents given as data: the readings `lint_documents` judges, for a caller that adds what
    only the running program knows (a live GradScaler) before `lint_readings` judges them."""
    errors: list[ReportError] = []
    recognised = [(doc, found) for doc in docs if (found := reader or reader_for(doc)) is not None]
    return _read_recognised(recognised, {}, errors, set())


def lint_readings(readings: list[Reading], checked: tuple[str, ...], errors: list[ReportError]) -> Report:
    """The findings of the rules over readings, with the inputs that could not be read."""
    findings: list[Finding] = []
    for cfg in readings:
        findings.extend(_name_filled_keys(cfg, check_policy(cfg.policy, cfg.facts, cfg.locate())))
        errors.extend(ReportError(loc.file or cfg.file, message, loc.line, loc.column) for loc, message in cfg.invalid)
    skipped = [e for e in errors if e.kind is ErrorKind.NOT_A_CONFIG]
    report = Report.of(_unique(findings), checked=checked, errors=tuple(dict.fromkeys(e for e in errors if e.kind is not ErrorKind.NOT_A_CONFIG)))
    if not skipped:
        return report
    many = len(skipped) != 1
    return report.with_info(notes=(*report.info.notes, *(f"{e.file}: {e.message}" for e in skipped)),
                            summary_caveats=(*report.info.summary_caveats, f"{len(skipped)} config file{'s' if many else ''} empty or a template, not checked"))


def read_configs(files: list[Path], own_keys: Mapping[Path, frozenset[str]] | None = None,
                 load_defaults: Mapping[Path, OwnSaid] | None = None,
                 documents: list[Document] | None = None) -> tuple[list[Reading], tuple[str, ...], list[ReportError]]:
    """Every training configuration in `files` as its framework runs it (the files of one run read together,
    referenced files followed, devices named in a folder added), the files read, and what could not be.
    `own_keys`: by file, the keys its project's own argument classes declare (`Document.own_keys`);
    `load_defaults`: by file, where its project's own loading code defaults the load dtype to half
    (`Document.own_load_default`) and where its own code switches a DeepSpeed config's precision itself
    (`Document.own_engine_precision`). `documents`, where given, gets every document of `files` that parsed, whether
    or not a framework recognises it."""
    errors: list[ReportError] = []
    recognised: list[tuple[Document, Reader]] = []
    loaded: dict[Path, list[Document]] = {}
    unreadable: set[str] = set()
    for path in files:
        text, error = read_text(path)  # once: a JSON that does not parse is read again as JSONC from it
        if text is not None:
            docs, error = load_documents(path, text)
        else:
            docs = []
        if error is not None and error.kind is ErrorKind.INPUT and text is not None:
            error = _another_tools_jsonc(path, text, error)
        own = (own_keys or {}).get(path)
        said = (load_defaults or {}).get(path)
        if own or said:
            docs = [replace(doc, own_keys=own or doc.own_keys, own_load_default=said and said.load_default,
                            own_engine_precision=said and said.engine_precision) for doc in docs]
        loaded[_key(path)] = docs
        if documents is not None:
            documents.extend(docs)
        if error is not None:
            # The rest of the tree is still checked and reported, and the run exits 2 as ruff's does on a file
            # that does not parse: a config its framework cannot read fails that run too. A file that is not the
            # user's to fix belongs in `exclude`.
            errors.append(error)
            if error.kind is not ErrorKind.NOT_A_CONFIG:
                unreadable.add(error.file)
            continue
        for doc in docs:
            found = reader_for(doc)
            if found is not None:
                recognised.append((doc, found))
    return _read_recognised(recognised, loaded, errors, unreadable)


def _another_tools_jsonc(path: Path, text: str, error: ReportError) -> ReportError:
    """A .json file with comments that, read as JSONC, is no training config of any framework (tsconfig.json, an
    editor's settings, a devcontainer) is another tool's file: a note. One that a framework would recognise stays an
    input error: frameworks read their configs with `json.load`, which fails on the comments."""
    if path.suffix.lower() != ".json":
        return error
    docs = jsonc_documents(text, str(path))
    if docs is None or any(reader_for(doc) is not None for doc in docs):
        return error
    return ReportError(str(path), "JSON with comments (JSONC) of another tool, no training config: not checked", error.line,
                       error.column, fatal=False, kind=ErrorKind.NOT_A_CONFIG)


def _read_recognised(recognised: list[tuple[Document, Reader]], loaded: dict[Path, list[Document]], errors: list[ReportError],
                     unreadable: set[str]) -> tuple[list[Reading], tuple[str, ...], list[ReportError]]:
    by_dir: dict[Path, list[tuple[Document, Reader]]] = defaultdict(list)
    for doc, found in recognised:
        by_dir[Path(doc.file).parent].append((doc, found))
    readings: list[Reading] = []
    for items in by_dir.values():
        readings.extend(_read_folder(items, errors))

    checked = {doc.file for doc, _ in recognised} | unreadable
    followed: list[Reading] = []
    launches: list[tuple[Reading, Reading]] = []  # (a config, what it runs: itself or a file it points at)
    for cfg in readings:
        launches.append((cfg, cfg))
        for ref in cfg.references:
            target = _follow(cfg, ref, loaded, errors)
            if target is not None:
                followed.append(target)
                launches.append((cfg, target))
                checked.update(target.files)
    # A file that a launcher or trainer config refers to runs as that config fills it in: reading it alone as
    # well would judge it without those settings and contradict the followed reading.
    referenced = {target.file for target in followed}
    readings = [cfg for cfg in readings if cfg.file not in referenced] + followed
    _add_devices(readings, by_dir)
    _launched_with_masters(readings, launches)
    return readings, tuple(sorted(checked)), errors


# What a launch config's run keeps of half-loaded weights that says there is an fp32 master copy: fp32 partitions
# in the optimizer (DeepSpeed's engines), or trainable parameters upcast to fp32 (accelerate's FSDP preparation).
_MASTERS = ("optimizer", "params")


def _launched_with_masters(readings: list[Reading], launches: list[tuple[Reading, Reading]]) -> None:
    """A run started by a launcher (`Reader.launched_by`) that shards nothing itself gets the sharding of the launch
    config it is started with, which its own file does not name. Where the project keeps a launch config whose run
    keeps fp32 masters in a folder beside the run's (``accelerate_configs/zero3.yaml`` next to ``recipes/``),
    whether the run's half weights have a master copy is decided at launch: `master_weights` is "launch", and no
    rule states a missing master copy as a fact. (A launch config that keeps none, plain DDP, changes nothing.)"""
    # each with the folder above its own, which the runs it may start lie in
    starters = [(starting.framework, _key(Path(starting.file)).parent.parent, runs) for starting, runs in launches
                if runs.facts.master_weights in _MASTERS or _engine_left_to_run(runs)]
    for cfg in readings:
        reader = reader_named(cfg.framework)
        if (reader is None or not reader.launched_by or cfg.policy is None or cfg.policy.params == FP32
                or cfg.facts.master_weights is not None or cfg.references):
            continue
        here = _key(Path(cfg.file)).parent
        launch = next((runs for framework, beside, runs in starters if framework in reader.launched_by and here.is_relative_to(beside)),
                      None)
        if launch is not None:
            where = launch.locate()
            cfg.set("master_weights", "launch", where("master_weights" if launch.facts.master_weights in _MASTERS else "strategy"))


def _engine_left_to_run(runs: Reading) -> bool:
    """A launch config that hands the run to an engine keeping fp32 masters (`ENGINES_WITH_MASTERS`) and leaves its
    precision to the run it starts (its half blocks "auto", its file not in the tree, no precision of its own): the
    launcher fills or adds the engine's block from the launched run's half precision, and the engine's half modes keep
    fp32 master partitions. A file that decides the engine's precision itself has a policy and says so in
    `master_weights`."""
    return runs.facts.strategy in ENGINES_WITH_MASTERS and runs.policy is None


def _key(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError, ValueError):
        return path


def _read_folder(items: list[tuple[Document, Reader]], errors: list[ReportError]) -> list[Reading]:
    """Read the configs of one folder, each framework's documents together (a reader may merge several files of one
    run), frameworks in the order their documents first appear."""
    by_reader: dict[Reader, list[Document]] = {}
    for doc, found in items:
        by_reader.setdefault(found, []).append(doc)
    return [cfg for found, docs in by_reader.items() for cfg in found.read_all(docs, errors)]


def _reference_document(cfg: Reading, ref: Reference, reader: Reader, loaded: dict[Path, list[Document]],
                        errors: list[ReportError]) -> Document | None:
    if ref.inline is not None:
        return ref.inline
    docs = loaded.get(_key(ref.path))
    if docs is None:
        if not _is_file(ref.path):
            errors.append(ReportError(ref.location.file or cfg.file, f"referenced {reader.title} config {quoted(str(ref.path))} not found",
                                      ref.location.line, ref.location.column, fatal=False))
            return None
        docs, error = load_documents(ref.path)
        loaded[_key(ref.path)] = docs
        if error is not None:
            errors.append(error)
            return None
    if not docs or not isinstance(docs[0].data, dict):
        if docs:
            errors.append(ReportError(str(ref.path), f"referenced {reader.title} config is not a JSON object", fatal=False))
        return None
    return docs[0]


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def _follow(cfg: Reading, ref: Reference, loaded: dict[Path, list[Document]], errors: list[ReportError]) -> Reading | None:
    """The config `ref` points at, read by the reader the reference names, as the pointing config fills it in."""
    reader = reader_named(ref.reader)
    if reader is None or reader.read_referenced is None:
        return None
    doc = _reference_document(cfg, ref, reader, loaded, errors)
    return None if doc is None else reader.read_referenced(doc, cfg, ref)


def _add_devices(readings: list[Reading], by_dir: dict[Path, list[tuple[Document, Reader]]]) -> None:
    """GPUs named by any file of a folder are the devices of the configs of that folder."""
    for folder, items in by_dir.items():
        devices = tuple(hw for doc, _ in items for hw in devices_named_in(doc))
        if not devices:
            continue
        for cfg in readings:
            if Path(cfg.file).parent == folder or any(Path(f).parent == folder for f in cfg.files):
                cfg.set("devices", devices, devices[0].location or cfg.locate().default)


def _name_filled_keys(cfg: Reading, found: list[Finding]) -> list[Finding]:
    """A finding at a launcher key that filled an "auto" value of the config it points at also names that key."""
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
