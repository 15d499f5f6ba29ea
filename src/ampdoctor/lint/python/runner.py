"""Run the checks over files: decode, parse, walk once, run every check whose trigger words occur, drop
suppressed findings. Files are spread over worker processes; a file that cannot be read or parsed becomes a
non-fatal `ReportError` for that file and never stops the run."""

from __future__ import annotations

import contextlib
import functools
import gc
import importlib.util
import os
import re
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence

from ampdoctor.core.catalog import documented_rule, finding
from ampdoctor.core.model import Finding, Location, Severity
from ampdoctor.core.registry import detectors
from ampdoctor.lint import cache as lint_cache
from ampdoctor.lint.pins import torch_floor
from ampdoctor.lint.python.context import Context
from ampdoctor.lint.python.embedded import CONSTRUCTOR_WORDS
from ampdoctor.lint.python.embedded import PRECISION_WORDS as CONFIG_PRECISION_WORDS
from ampdoctor.lint.python.embedded import applies as holds_python_config
from ampdoctor.lint.python.embedded import embedded_findings
from ampdoctor.lint.python.kind import CodeKind, Kind, file_kind, site_kind
from ampdoctor.lint.python.project import PRECISION_WORDS, Evidence, ProjectContext, ProjectModel, Summary, project_words
from ampdoctor.lint.python.project import summarize as summarize_file
from ampdoctor.lint.python.source import SourceFile
from ampdoctor.lint.python.suppress import Suppressions, is_suppressed, parse_suppressions
from ampdoctor.lint.python.words import TextWords, Vocabulary, holds, search_order
from ampdoctor.report import ErrorKind, Report, ReportError

# Below this many files a process pool costs more than it saves.
PARALLEL_MIN_FILES = 24

FileResult = tuple[str, list[Finding], "ReportError | None", "Summary | None"]


def lint_source(text: str, path: str = "<string>", kind_path: str | None = None,
                project: ProjectContext | None = None) -> tuple[list[Finding], ReportError | None]:
    """Findings for one source text (unsuppressed), or the error that kept it from being checked. `kind_path` is
    the path that tells what kind of code this is (`lint.python.kind`): the path below the folder linted, so that
    a checkout under /home/x/tests/ is not all test code; it defaults to `path`. `project` is the precision the
    project runs this file's code under (`lint.python.project`); without it the file is judged alone."""
    findings, error, _ = _lint(text, path, kind_path, project, summarize=False)
    return findings, error


def _lint(text: str, path: str, kind_path: str | None, project: ProjectContext | None,
          summarize: bool, check: bool | str = True) -> tuple[list[Finding], ReportError | None, Summary | None]:
    return _lint_twice(text, path, kind_path, project, summarize, check, None)[0]


# A second judgement of a file: its findings and the error that cut it short, if any.
Again = tuple[list[Finding], "ReportError | None"]


def _lint_twice(text: str, path: str, kind_path: str | None, project: ProjectContext | None, summarize: bool,
                check: bool | str, again: ProjectContext | None,
                known: "Known | None" = None) -> tuple[tuple[list[Finding], ReportError | None, Summary | None], Again | None]:
    """The file judged under `project` (`_lint`) and, when `again` is given and that judgement stands (no error),
    once more under `again` with the rules that read it (`check="project"`), on the same parse. `known`: what a
    first look at the same text found (`_first_look`)."""
    rel = kind_path or path
    kind = known[0] if known is not None else file_kind(rel, text)
    words = TextWords(text, _vocabulary(), known[1] if known is not None else None)
    checks = _checks(words, project, check)
    trains = _trains(kind, words)
    configs = check is True and holds_python_config(words)
    later = _checks(words, again, "project") if again is not None else []
    try:
        if not checks and not configs and not (summarize and trains) and not later:
            SourceFile.syntax_check(path, text)
            summary = summarize_file(rel, text, None, False, sensitive(words)) if summarize else None
            return ([], None, summary), (([], None) if again is not None else None)
        src = SourceFile.parse(path, text)
    except SyntaxError as exc:
        newer = newer_syntax(exc, text)
        if newer:
            version = f"{sys.version_info[0]}.{sys.version_info[1]}"
            return ([], ReportError(path, f"{NEWER_PYTHON}{newer}; Python {version} cannot parse it, not checked", exc.lineno, exc.offset,
                                    fatal=False, kind=ErrorKind.NEWER_SYNTAX), None), None
        return ([], ReportError(path, f"syntax error: {exc.msg}", exc.lineno, exc.offset, fatal=False, kind=ErrorKind.SYNTAX), None), None
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, absurd nesting
        return ([], ReportError(path, f"syntax error: {exc}", fatal=False, kind=ErrorKind.SYNTAX), None), None
    ctx = Context(src, project)
    suppressions = parse_suppressions(text)
    findings, error = _check(ctx, checks, kind, suppressions)
    if error is not None:
        return (findings, error, None), None
    if configs:
        findings += [judged_by_kind(f, kind) for f in _config_findings(ctx, findings, suppressions)]
    first = findings, None, summarize_file(rel, text, ctx, trains, sensitive(words)) if summarize else None
    if again is None:
        return first, None
    return first, _check(Context(src, again), later, kind, suppressions) if later else ([], None)


def _trains(kind: Kind, words: TextWords) -> bool:
    """A training file that names a precision: its summary needs the parsed file (`project.summarize`)."""
    return kind.kind is CodeKind.TRAINING and any(w in words for w in PRECISION_WORDS)


def _checks(words: TextWords, project: ProjectContext | None, check: bool | str) -> list:
    """The code detectors to run. `check`: True (all), False (none: a file summarised for context only), or
    "project" (again, under the project's context: only the rules that read it; the others' findings stand).
    A detector runs when its trigger words occur in the text, or in the words its project context stands for."""
    if check is False:
        return []
    seen = words.plus(project_words(project))
    return [d for d, groups in _code_detectors() if (check is True or d.rule_id in project_rules()) and holds(seen, groups)]


@functools.lru_cache(maxsize=1)
def _code_detectors() -> tuple[tuple, ...]:
    """Each code detector with its trigger groups in the order cheapest to test (`words.search_order`)."""
    return tuple((d, search_order(d.triggers)) for d in detectors("code"))


@functools.lru_cache(maxsize=1)
def _vocabulary() -> Vocabulary:
    """Every word asked of a file before it is parsed."""
    triggers = [w for d in detectors("code") for group in d.triggers for w in group]
    return Vocabulary([*triggers, *PRECISION_WORDS, *CONSTRUCTOR_WORDS, *CONFIG_PRECISION_WORDS])


@functools.lru_cache(maxsize=1)
def project_rules() -> frozenset[str]:
    """Rules with a detector that reads the project context: the ones judged again where it reaches."""
    return frozenset(d.rule_id for d in detectors("code") if d.project)


def sensitive(words: TextWords) -> bool:
    """Could a project context change this file's findings: would a detector that reads it run, given every word
    a context stands in for?"""
    seen = words.plus(_any_context_words())
    return any(d.project and holds(seen, groups) for d, groups in _code_detectors())


@functools.lru_cache(maxsize=1)
def _any_context_words() -> str:
    any_ = Evidence("any", frozenset({"bf16"}), "", 0)
    return project_words(ProjectContext(autocast=any_, half_model=any_, half=any_, guarded=any_))


def _check(ctx: Context, checks: list, kind: Kind, suppressions: Suppressions) -> tuple[list[Finding], ReportError | None]:
    path, src = ctx.src.path, ctx.src
    findings: list[Finding] = []
    for check in checks:
        try:
            for node, message, *severity in check.fn(ctx):  # a third item, when given, is the hit's severity
                line = getattr(node, "lineno", None)
                column = getattr(node, "col_offset", None)
                found = finding(check.rule_id, message, Location(file=path, line=line, column=None if column is None else column + 1),
                                severity=severity[0] if severity else None)
                found = judged_by_kind(found, site_kind(src, node, kind))
                if not is_suppressed(found, suppressions):
                    findings.append(found)
        except RecursionError:
            return findings, ReportError(path, f"too deeply nested to check for {check.rule_id}", fatal=False)
    return findings, None


def judged_by_kind(found: Finding, kind: Kind) -> Finding:
    """A finding in code that builds odd cases on purpose (tests, benchmarks), or of a training-only rule in code
    that never trains (inference, conversion, validation and sampling), is a note that says which code it is."""
    if found.severity is Severity.INFO:
        return found
    if kind.exercise:
        note = f" (in {kind.kind.value} code: {kind.why})"
    elif not kind.trains and documented_rule(found.rule_id).scope == "training":
        note = f" (in {kind.kind.value} code: {kind.why}; it does not change training)"
    else:
        return found
    return replace(found, severity=Severity.INFO, message=found.message + note,
                   details={**found.details, "code_kind": kind.kind.value})


@functools.lru_cache(maxsize=1)
def _code_judged() -> frozenset[str]:
    """Rules with a code detector of their own: they judge Python (an FSDP `MixedPrecision(...)` too) themselves."""
    return frozenset(d.rule_id for d in detectors("code") if d.reads_configs)


def _config_findings(ctx: Context, found: list[Finding], suppressions) -> list[Finding]:
    """The policy rules' findings over the configs written in this file's Python (`lint.python.embedded`)."""
    seen = {(f.rule_id, f.location.line) for f in found}
    try:
        extra = embedded_findings(ctx, _code_judged())
    except RecursionError:
        return []
    return [f for f in extra if (f.rule_id, f.location.line) not in seen and not is_suppressed(f, suppressions)]


# The message of a file this interpreter cannot parse because it uses newer Python syntax (ErrorKind.NEWER_SYNTAX): a note, not an input
# error (the file is fine; linting it needs Python 3.12+).
NEWER_PYTHON = "uses syntax of Python 3.12+: "
_FSTRING_3_12 = ("f-string expression part cannot include a backslash", "f-string expression part cannot include '#'",
                 "f-string: unmatched", "f-string: expecting '}'")
_F_PREFIX = re.compile(r"(?i)(?:[rb]?f|f[rb]?)[\"']")
_TYPE_PARAMS = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+\w+\s*\[|^\s*type\s+\w+\s*(?:\[[^=]*\])?\s*=")


def newer_syntax(exc: SyntaxError, text: str) -> str | None:
    """What Python 3.12 syntax a SyntaxError of an older interpreter points at, if any: f-strings as PEP 701 allows
    them (quotes reused, line breaks, backslashes or comments inside the braces) or type parameters (PEP 695)."""
    if sys.version_info >= (3, 12) or not exc.lineno:
        return None
    lines = text.splitlines()
    line = lines[exc.lineno - 1] if exc.lineno <= len(lines) else ""
    msg = exc.msg or ""
    if msg.startswith(_FSTRING_3_12):
        return "an f-string (PEP 701)"
    if msg.startswith("unterminated string literal") and exc.offset and _F_PREFIX.match(line, exc.offset - 1) \
            and _opens_a_field(line[exc.offset - 1:]):
        return "an f-string spanning lines (PEP 701)"
    if _TYPE_PARAMS.match(line):
        return "type parameters (PEP 695)"
    return None


def _opens_a_field(rest: str) -> bool:
    """The f-string's line leaves a replacement field open: only then can 3.12 continue it on the next line (a bare
    unclosed quote such as ``f"`` is a syntax error in every version)."""
    rest = rest.replace("{{", "").replace("}}", "")
    return rest.count("{") > rest.count("}")


def lint_file(path: str, kind_path: str | None = None, project: ProjectContext | None = None,
              summarize: bool = False, check: bool | str = True, cache: str | None = None) -> FileResult:
    """Lint one file; with `cache` (a folder), a result stored for the same content, path below the project and
    project context is taken instead (`lint.cache`)."""
    read = _read(path)
    if isinstance(read, ReportError):
        return path, [], read, None
    raw, text = read
    entry = lint_cache.key(raw, kind_path or path, project, summarize, check) if cache else None
    hit = _cached(cache, entry, path)
    if hit is not None:
        return hit
    findings, error, summary = _lint(text, path, kind_path, project, summarize, check)
    _store(cache, entry, findings, error, summary)
    return path, findings, error, summary


def _read(path: str) -> tuple[bytes, str] | ReportError:
    try:
        raw = Path(path).read_bytes()
        return raw, importlib.util.decode_source(raw)
    except (OSError, UnicodeDecodeError, SyntaxError, LookupError) as exc:
        return ReportError(path, f"cannot read: {exc}", fatal=False, kind=ErrorKind.UNREADABLE)


def _cached(cache: str | None, entry: str | None, path: str) -> FileResult | None:
    hit = lint_cache.load(Path(cache), entry, path) if cache and entry else None
    return (path, *hit) if hit is not None else None


def _store(cache: str | None, entry: str | None, findings: list[Finding], error: ReportError | None, summary: Summary | None) -> None:
    if cache and entry:
        lint_cache.store(Path(cache), entry, findings, error, summary)


# A file's kind and the trigger words looked for in it, found or not: from the first phase to the second.
Known = tuple[Kind, dict[str, bool]]


def _first_look(task: "Task") -> tuple[FileResult, bool, Known | None]:
    """First phase of `lint_python_files`: the file's summary, for the project model, and whether its judgement is
    deferred to the second phase (True), where one parse serves both its judgements. Only a training file that
    names a precision is parsed now, since its summary needs the parse; a stored result is taken as it is."""
    path, kind_path, project, summarize, check, cache = task
    read = _read(path)
    if isinstance(read, ReportError):
        return (path, [], read, None), False, None
    raw, text = read
    entry = lint_cache.key(raw, kind_path or path, project, summarize, check) if cache else None
    hit = _cached(cache, entry, path)
    if hit is not None:
        return hit, False, None
    rel = kind_path or path
    kind, words = file_kind(rel, text), TextWords(text, _vocabulary())
    if summarize and _trains(kind, words):
        findings, error, summary = _lint(text, path, kind_path, project, summarize, check)
        _store(cache, entry, findings, error, summary)
        return (path, findings, error, summary), False, None
    # what `_lint` will summarise, if the file parses and its checks finish (`_finish` tells)
    summary = summarize_file(rel, text, None, False, sensitive(words)) if summarize else None
    return (path, [], None, summary), True, (kind, words.known)


def _finish(task: "Task", again: ProjectContext | None, known: Known | None) -> tuple[FileResult | None, FileResult | None]:
    """Second phase: the deferred judgement of a file and, under `again` (the context its project's precision
    reaches it with), its judgement by the rules that read it; for a file judged in the first phase, only that."""
    path, kind_path, project, summarize, check, cache = task
    if known is None:  # judged in the first phase
        return None, lint_file(path, kind_path, again, False, "project", cache)
    read = _read(path)
    if isinstance(read, ReportError):
        return (path, [], read, None), None
    raw, text = read
    entry = lint_cache.key(raw, kind_path or path, project, summarize, check) if cache else None
    entry_again = lint_cache.key(raw, kind_path or path, again, False, "project") if cache and again is not None else None
    stored = _cached(cache, entry_again, path)
    (findings, error, summary), second = _lint_twice(text, path, kind_path, project, summarize, check,
                                                     again if stored is None else None, known)
    _store(cache, entry, findings, error, summary)
    if error is not None or again is None:
        return (path, findings, error, summary), None
    if stored is None and second is not None:
        _store(cache, entry_again, second[0], second[1], None)
        stored = (path, second[0], second[1], None)
    return (path, findings, error, summary), stored


@contextlib.contextmanager
def _cycle_collector_paused():
    """ASTs are big acyclic object graphs that reference counting frees on its own. With torch imported the
    heap holds ~170k tracked objects, and every collection that AST allocation triggers rescans them: that
    doubled the time to lint the transformers tree (docs/benchmarks.md). Pause only the cycle collector."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# path, kind_path, project context, summarize, check (True, False or "project"), cache folder
Task = tuple[str, "str | None", "ProjectContext | None", bool, "bool | str", "str | None"]


def _chunk(fn: Callable[..., Any], items: list[tuple]) -> list[Any]:
    with _cycle_collector_paused():
        return [fn(*item) for item in items]


def _run(fn: Callable[..., Any], items: list[tuple], jobs: int) -> list[Any]:
    """`fn(*item)` for each item, in worker processes; the results in the order of the items."""
    workers = _workers(len(items), jobs)
    if workers <= 1:
        return _chunk(fn, items)
    # Interleaved chunks so that big files (one model family sits together) spread over the workers.
    n_chunks = workers * 16
    chunks = [items[i::n_chunks] for i in range(n_chunks)]
    out: list[Any] = [None] * len(items)
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for i, results in enumerate(pool.map(functools.partial(_chunk, fn), chunks)):
            out[i::n_chunks] = results
    return out


def _workers(n: int, jobs: int) -> int:
    workers = jobs or os.cpu_count() or 1
    return 1 if n < PARALLEL_MIN_FILES else workers


def _chunk_order(n: int, jobs: int) -> list[int]:
    """The order in which `_run`'s chunks hold `n` items: files are reported in it (`checked`), chunk by chunk."""
    workers = _workers(n, jobs)
    if workers <= 1:
        return list(range(n))
    n_chunks = workers * 16
    return [j for i in range(n_chunks) for j in range(i, n, n_chunks)]


def lint_python_files(files: Sequence[Path | str], jobs: int = 0, roots: Sequence[Path | str] = (),
                      config_half: Sequence[Evidence] = (), context_files: Sequence[Path | str] = (),
                      cache: Path | None = None) -> Report:
    """Lint `files` with `jobs` worker processes (0: one per core). Every file read is listed in `checked`. A file
    below one of the folders `roots` is judged by its path below that folder (`lint_source`'s `kind_path`).

    The files below one root are one project (files named alone, another): each file is summarised, the precision
    of the training files, and of the first training config in `config_half` that lies in the project, follows
    their imports (`lint.python.project`), and the files it reaches are judged again under it by the rules that
    read it. `context_files` are summarised for that but not reported. With `cache` (a folder), unchanged files
    are not parsed again (`lint.cache`).

    Two phases: the first reads every file and summarises it (parsing only the training files that name a
    precision); the project model then says which files the precision reaches, and the second phase parses each
    remaining file once for both its judgements. A summary taken before the parse assumed the file would be
    judged; where one was not (a syntax error), the model is built again and the files whose context changes are
    judged again under the right one."""
    named = [str(f) for f in files]
    wanted = set(named)
    extra = [str(f) for f in context_files if str(f) not in wanted]
    # What a project's requirement files and configs say is known before any file is read: it is part of every
    # file's context from the first pass.
    base = {Path(r): _base_context(Path(r), config_half) for r in roots}

    def start(p: str) -> ProjectContext | None:
        root = _root_of(p, roots)
        return base[Path(root)] if root is not None else None

    folder = str(cache) if cache is not None else None
    tasks: list[Task] = [(p, _below(Path(p), roots), start(p), True, True, folder) for p in named] \
        + [(p, _below(Path(p), roots), None, True, False, folder) for p in extra]
    looked = _run(_first_look, [(t,) for t in tasks], jobs)
    reached = _reached([r for r, _, _ in looked], roots, base, config_half, wanted)
    todo = [i for i, (task, (_, deferred, _)) in enumerate(zip(tasks, looked)) if deferred or task[0] in reached]
    done = dict(zip(todo, _run(_finish, [(tasks[i], reached.get(tasks[i][0]), looked[i][2]) for i in todo], jobs)))
    first = [done[i][0] if i in done and done[i][0] is not None else r for i, (r, _, _) in enumerate(looked)]
    again = {tasks[i][0]: done[i][1] for i in todo if done[i][1] is not None}
    if any(looked[i][0][3] != first[i][3] for i in todo if looked[i][1]):
        again = _judged_again(first, tasks, again, reached, _reached(first, roots, base, config_half, wanted), jobs)
    return _report([_merged(first[i], again.get(first[i][0])) for i in _chunk_order(len(first), jobs) if first[i][0] in wanted])


def _judged_again(first: list[FileResult], tasks: list[Task], again: dict[str, FileResult],
                  assumed: dict[str, ProjectContext], reached: dict[str, ProjectContext], jobs: int) -> dict[str, FileResult]:
    """The second judgements under the contexts of the model built from the true summaries: a file whose context
    is the one assumed keeps its judgement; the others are judged again (or not at all, if no longer reached)."""
    by_path = {t[0]: t for t in tasks}
    redo = [p for p, ctx in reached.items() if assumed.get(p) != ctx or p not in again]
    kept = {p: r for p, r in again.items() if p in reached and p not in redo}
    redone = _run(lint_file, [(p, by_path[p][1], reached[p], False, "project", by_path[p][5]) for p in redo], jobs)
    return {**kept, **{r[0]: r for r in redone}}


def _merged(first: FileResult, again: FileResult | None) -> FileResult:
    """The first pass's findings of the rules that do not read the project context, and the second pass's of those
    that do (its error, if it had one)."""
    if again is None:
        return first
    kept = [f for f in first[1] if f.rule_id not in project_rules()]
    return first[0], kept + again[1], again[2] or first[2], first[3]


def _reached(results: list[FileResult], roots: Sequence[Path | str], base: dict[Path, ProjectContext],
             config_half: Sequence[Evidence], wanted: set[str]) -> dict[str, ProjectContext]:
    """The files to judge again, each with the context its project's precision reaches it with."""
    out: dict[str, ProjectContext] = {}
    for root, group in _projects(results, roots).items():
        half = [e for e in config_half if root is None or _root_of(e.file, [root])]
        out.update(_contexts(group, base.get(root) if root is not None else None, half, wanted))
    return out


def _contexts(results: list[FileResult], known: ProjectContext | None, half: list[Evidence],
              wanted: set[str]) -> dict[str, ProjectContext]:
    """The files of one project that its precision reaches, with the context of each."""
    summaries = {r[3].path: r[3] for r in results if r[3] is not None}
    by_rel = {r[3].path: r[0] for r in results if r[3] is not None}

    def text_of(rel: str) -> str | None:
        try:
            return importlib.util.decode_source(Path(by_rel[rel]).read_bytes())
        except (OSError, UnicodeDecodeError, SyntaxError, LookupError, KeyError):
            return None

    model = ProjectModel(summaries, half, torch_floor=known.torch_floor if known else None,
                         trains_bf16=known.trains_bf16 if known else None, text_of=text_of)
    return {by_rel[rel]: ctx for rel, ctx in model.contexts().items() if by_rel[rel] in wanted}


def _base_context(root: Path, config_half: Sequence[Evidence]) -> ProjectContext:
    bf16 = next((e for e in config_half if "bf16" in e.dtypes and _root_of(e.file, [root])), None)
    if bf16 is not None:
        bf16 = replace(bf16, file=_below(Path(bf16.file), [root]) or bf16.file)
    return ProjectContext(torch_floor=torch_floor(root), trains_bf16=bf16)


def _projects(results: list[FileResult], roots: Sequence[Path | str]) -> dict[Path | None, list[FileResult]]:
    out: dict[Path | None, list[FileResult]] = {}
    for r in results:
        root = _root_of(r[0], roots)
        out.setdefault(Path(root) if root is not None else None, []).append(r)
    return out


def _report(results: list[FileResult]) -> Report:
    findings: list[Finding] = []
    errors: list[ReportError] = []
    checked: list[str] = []
    newer: list[ReportError] = []
    for path, found, error, _ in results:
        findings.extend(found)
        if error is not None and error.kind is ErrorKind.UNREADABLE:
            errors.append(error)
            continue
        if error is not None and error.kind is ErrorKind.NEWER_SYNTAX:
            newer.append(error)
            continue
        checked.append(path)
        if error is not None:
            errors.append(error)
    report = Report.of(findings, checked=tuple(checked), errors=tuple(errors))
    if newer:
        many = len(newer) != 1
        report = report.with_info(notes=tuple(str(e) for e in newer), summary_caveats=(
            f"{len(newer)} file{'s' if many else ''} not checked: Python 3.12+ syntax (lint {'them' if many else 'it'} with Python 3.12+)",))
    return report


def _root_of(path: Path | str, roots: Sequence[Path | str]) -> Path | str | None:
    """The first of `roots` that `path` lies below."""
    for root in roots:
        try:
            Path(path).relative_to(root)
            return root
        except ValueError:
            continue
    return None


def _below(path: Path, roots: Sequence[Path | str]) -> str | None:
    root = _root_of(path, roots)
    return path.relative_to(root).as_posix() if root is not None else None
