"""Run the checks over files: decode, parse, walk once, run every check whose trigger words occur, drop
suppressed findings. Files are spread over worker processes; a file that cannot be read or parsed becomes a
non-fatal `ReportError` for that file and never stops the run."""

from __future__ import annotations

import enum
import functools
import importlib.util
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from ampdoctor.core.catalog import documented_rule, finding
from ampdoctor.core.model import Finding, Location, Severity
from ampdoctor.core.registry import detectors
from ampdoctor.lint import cache as lint_cache
from ampdoctor.lint.launch import Launch, option_values, runs_of
from ampdoctor.lint.python.config_values import ConfigValues
from ampdoctor.lint.python.context import Context
from ampdoctor.lint.python.kind import CodeKind, Kind, file_kind, main_block, named_training_script, site_kind
from ampdoctor.lint.python.newer import NEWER_PYTHON, newer_syntax
from ampdoctor.lint.python.pool import chunk_order, run, run_rest
from ampdoctor.lint.python.project import Evidence, ProjectContext, Summary
from ampdoctor.lint.python.project import summarize as summarize_file
from ampdoctor.lint.python.reach import ConfigScope, FileResult, below, contexts_reached, imported_by_training, root_of
from ampdoctor.lint.python.source import SourceFile
from ampdoctor.lint.python.suppress import Suppressions, is_suppressed, parse_suppressions
from ampdoctor.lint.python.triggers import checks_for, code_detectors, project_rules, sensitive, trains_in_precision, vocabulary
from ampdoctor.lint.python.words import Known as WordsKnown
from ampdoctor.lint.python.words import TextWords
from ampdoctor.report import ErrorKind, Report, ReportError

if TYPE_CHECKING:
    from ampdoctor.lint.python.options import ProjectOptions


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
    first look at the same text found (`_first_look`). With `check="base"` the first judgement leaves out the rules
    that read the project context: their judgement under another context replaces it (`_first_check`)."""
    rel = kind_path or path
    words = TextWords(text, vocabulary(), known[1] if known is not None else None)
    kind = known[0] if known is not None else file_kind(rel, words)
    # A first look's summary is this one: it looked at a file that does not train in a precision (or would have
    # judged it then), and the summary of such a file is read from its text alone.
    summarized = known[2] if known is not None else None
    checks = checks_for(words, project, check)
    trains = trains_in_precision(kind, words)
    configs = check in (True, "base") and _holds_python_config(words)
    later = checks_for(words, again, "project") if again is not None else []
    if not checks and not configs and not (summarize and trains) and not later:
        src: SourceFile | ReportError | None = _parsed(path, text, index=False)
        if src is None:
            summary = (summarized or summarize_file(rel, words, None, False, sensitive(words))) if summarize else None
            return ([], None, summary), (([], None) if again is not None else None)
    else:
        src = _parsed(path, text, index=True)
    if not isinstance(src, SourceFile):
        return ([], src, None), None
    suppressions = parse_suppressions(text)
    ctx = Context(src, project)
    first = _judged(ctx, checks, configs, kind, suppressions, rel, (summarize, trains, words, summarized))
    if again is None or first[1] is not None:
        return first, None
    return first, _check(ctx.under(again), later, kind, suppressions) if later else ([], None)


def _holds_python_config(words: TextWords) -> bool:
    # `embedded` and the framework readers it imports are imported to lint a file, never for a stored result
    from ampdoctor.lint.python.embedded import applies

    return applies(words)


def _judged(ctx: Context, checks: list, configs: bool, kind: Kind, suppressions: Suppressions,
            rel: str, summary: tuple[bool, bool, TextWords, Summary | None]) -> tuple[list[Finding], ReportError | None, Summary | None]:
    """The findings of `checks` (and of the configs it writes, with `configs`) on the file under its project context,
    and the file's summary if asked (`summary`: asked, trains in a precision, its words, the summary made before the
    parse if any)."""
    findings, error = _check(ctx, checks, kind, suppressions)
    if error is not None:
        return findings, error, None
    if configs:
        findings += [judged_by_kind(f, kind) for f in _config_findings(ctx, findings, suppressions)]
    summarize, trains, words, summarized = summary
    if not summarize:
        return findings, None, None
    return findings, None, summarized or summarize_file(rel, words, ctx, trains, sensitive(words))


def _parsed(path: str, text: str, index: bool) -> SourceFile | ReportError | None:
    """The parsed file (None when not `index`ed: only its syntax was checked), or the error that kept it from parsing."""
    try:
        return SourceFile.parse(path, text) if index else SourceFile.syntax_check(path, text)
    except SyntaxError as exc:
        newer = newer_syntax(exc, text)
        if newer:
            version = f"{sys.version_info[0]}.{sys.version_info[1]}"
            return ReportError(path, f"{NEWER_PYTHON}{newer}; Python {version} cannot parse it, not checked", exc.lineno, exc.offset,
                               fatal=False, kind=ErrorKind.NEWER_SYNTAX)
        return ReportError(path, f"syntax error: {exc.msg}", exc.lineno, exc.offset, kind=ErrorKind.SYNTAX)
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, absurd nesting
        return ReportError(path, f"syntax error: {exc}", kind=ErrorKind.SYNTAX)


def _check(ctx: Context, checks: list, kind: Kind, suppressions: Suppressions) -> tuple[list[Finding], ReportError | None]:
    path, src = ctx.src.path, ctx.src
    findings: list[Finding] = []
    for check in checks:
        try:
            for node, message, *rest in check.fn(ctx):  # a third item, when given, is the hit's severity; a fourth, its details
                if ctx.flow.never_taken(node) is not None:
                    continue  # in a branch of a dtype test the file's own values decide against: no run gets there
                line = getattr(node, "lineno", None)
                column = getattr(node, "col_offset", None)
                found = finding(check.rule_id, message, Location(file=path, line=line, column=None if column is None else column + 1),
                                severity=rest[0] if rest else None, details=rest[1] if len(rest) > 1 else None)
                found = judged_by_kind(_by_optional_evidence(found, ctx), site_kind(src, node, kind))
                if not is_suppressed(found, suppressions):
                    findings.append(found)
        except RecursionError:
            return findings, ReportError(path, f"too deeply nested to check for {check.rule_id}", fatal=False)
    return findings, None


def _by_optional_evidence(found: Finding, ctx: Context) -> Finding:
    """A finding that cites, as what makes its code half, the project's model cast or autocast that no run of the
    project makes (`Evidence.only_with`: ``if args.fp16: model.half()``, ``autocast(enabled=args.amp)``, with a flag
    no launcher passes): a note that says so."""
    if found.severity is Severity.INFO:
        return found
    evidence = next((e for e in (ctx.project.half_model, ctx.project.autocast)
                     if e is not None and e.only_with and e.describe() in found.message), None)
    if evidence is None:
        return found
    note = (f"; that {'cast' if evidence is ctx.project.half_model else 'autocast'} is made only where `{evidence.only_with}` "
            f"holds ({evidence.file}:{evidence.line}), which neither the script's defaults nor a launcher of the project sets: "
            "a latent defect of a run the project does not make")
    return replace(found, severity=Severity.INFO, message=found.message + note, details={**found.details, "option_off": [evidence.only_with]})


def judged_by_kind(found: Finding, kind: Kind) -> Finding:
    """A finding in code that builds odd cases on purpose (tests, benchmarks), that nothing imports (a generator's
    source) or that only draws figures (a plotting script), of a training-only rule in code that never trains
    (inference, conversion, validation and sampling), or of a rule about what a model computes (`scope: compute`) in
    conversion code, which only loads and writes weights, is a note that says which code it is."""
    if found.severity is Severity.INFO:
        return found
    if kind.never_warns:
        note = f" (in {kind.kind.value} code: {kind.why})"
    elif not kind.trains and documented_rule(found.rule_id).scope == "training":
        note = f" (in {kind.kind.value} code: {kind.why}; it does not change training)"
    elif not kind.computes and documented_rule(found.rule_id).scope == "compute":
        note = f" (in {kind.kind.value} code: {kind.why}; it writes weights and computes nothing with them)"
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
        from ampdoctor.lint.python.embedded import embedded_findings

        extra = embedded_findings(ctx, _code_judged())
    except RecursionError:
        return []
    return [f for f in extra if (f.rule_id, f.location.line) not in seen and not is_suppressed(f, suppressions)]


def lint_file(path: str, kind_path: str | None = None, project: ProjectContext | None = None,
              summarize: bool = False, check: bool | str = True, cache: str | None = None,
              seen: lint_cache.Seen | None = None) -> FileResult:
    """Lint one file; with `cache` (a folder), a result stored for the same content, path below the project and
    project context is taken instead (`lint.cache`). `seen`: the file's entry in the cache's index, if it has one
    (a file that still has the signature recorded there is not read to find its stored result)."""
    source = _Source(path, seen, cached=bool(cache))
    hit = _cached(cache, source.key(kind_path, project, summarize, check), path) if cache else None
    if hit is not None:
        return hit
    text = source.text()
    if isinstance(text, ReportError):
        return path, [], text, None
    findings, error, summary = _lint(text, path, kind_path, project, summarize, check)
    if cache:
        _store(cache, source.key(kind_path, project, summarize, check), findings, error, summary)
    return path, findings, error, summary


class _Source:
    """A file to lint and, with a cache (`cached`), the hash of its content: from the cache's index while the file
    keeps the signature recorded there (`lint.cache.unchanged`), and then it is read only if it must be linted;
    else from its bytes. Without a cache nothing asks for the hash, and none is made."""

    def __init__(self, path: str, seen: lint_cache.Seen | None = None, cached: bool = True) -> None:
        self.path = path
        self.cached = cached
        self.digest = lint_cache.unchanged(path, seen) if cached else None
        self.seen = seen if self.digest is not None else None  # the index entry that holds for it after this run
        self.raw: bytes | ReportError | None = None

    def _read(self) -> bytes | ReportError:
        if self.raw is None:
            try:
                if self.cached:
                    self.raw, self.digest, self.seen = lint_cache.read(self.path)
                else:
                    with open(self.path, "rb") as f:
                        self.raw = f.read()
            except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the name
                self.raw, self.digest, self.seen = ReportError(self.path, f"cannot read: {exc}", kind=ErrorKind.UNREADABLE), None, None
        return self.raw

    def key(self, kind_path: str | None, project: ProjectContext | None, summarize: bool, check: bool | str) -> str | None:
        """The cache entry of the file's content judged so (`lint.cache.key`); None when it cannot be read."""
        if self.digest is None and self.cached:
            self._read()
        return lint_cache.key(self.digest, kind_path or self.path, project, summarize, check) if self.digest else None

    def text(self) -> str | ReportError:
        """The decoded text; the file is read now if it was not, and what it holds now is what `key` names after."""
        raw = self._read()
        return raw if isinstance(raw, ReportError) else _decoded(self.path, raw)


def _decoded(path: str, raw: bytes) -> str | ReportError:
    """A file's text as Python reads it (its coding line, a BOM), or why it cannot be read."""
    try:
        return importlib.util.decode_source(raw)
    except (UnicodeDecodeError, SyntaxError, LookupError) as exc:
        return ReportError(path, f"cannot read: {exc}", kind=ErrorKind.UNREADABLE)


def _read(path: str) -> str | ReportError:
    """The text of the file at `path`, read without hashing it."""
    return _Source(path, cached=False).text()


def _cached(cache: str | None, entry: str | None, path: str) -> FileResult | None:
    hit = lint_cache.load(cache, entry, path) if cache and entry else None
    return (path, *hit) if hit is not None else None


def _store(cache: str | None, entry: str | None, findings: list[Finding], error: ReportError | None, summary: Summary | None) -> None:
    if cache and entry:
        lint_cache.store(Path(cache), entry, findings, error, summary)


# path, kind_path, project context, summarize, check (True, False or "project"), cache folder, the file's entry in
# the cache's index
Task = tuple[str, "str | None", "ProjectContext | None", bool, "bool | str", "str | None", "lint_cache.Seen | None"]
# A file's kind, the trigger words looked for in it (found or not) and its summary if one was asked: from the first
# phase to the second.
Known = tuple[Kind, WordsKnown, "Summary | None"]


class Stage(enum.Enum):
    """How far the first phase judged a file."""

    JUDGED = "judged"  # wholly (a training file that names a precision, or a stored result)
    DEFERRED = "deferred"  # not at all: the second phase parses it once for all its judgements
    # all but the rules that read the project context (a stored result): their judgement, under the context the
    # project's precision reaches it with or else its own, comes from the second phase
    BASE = "base"


# A first look's answer: the file's result so far, how far it was judged, what it found in the text of a deferred
# file, and the file's index entry now.
Look = tuple[FileResult, Stage, "Known | None", "lint_cache.Seen | None"]


def _loaded() -> None:
    """Load what judging any file needs (every rule's module, the trigger words, the readers of configs written in
    Python) before worker processes fork: each pool's workers would otherwise import them all again, each of them."""
    code_detectors()
    vocabulary()


def _first_check(check: bool | str, again: ProjectContext | None) -> bool | str:
    """The rules of a file's first judgement: with a second judgement under `again`, whose findings of the rules
    that read the project context replace the first's (`_merged`), all but those."""
    return "base" if check is True and again is not None else check


def _stored_first(cache: str | None, entry: "Callable[[bool | str], str | None]", check: bool | str,
                  path: str) -> tuple[FileResult, Stage] | None:
    """A stored first judgement of a file: whole, or (`_first_check`) but for the rules that read the project
    context. `entry(check)`: the file's cache entry for a judgement with those rules."""
    if not cache:
        return None
    for stage, rules in ((Stage.JUDGED, check), (Stage.BASE, "base")) if check is True else ((Stage.JUDGED, check),):
        hit = _cached(cache, entry(rules), path)
        if hit is not None:
            return hit, stage
    return None


def _first_look(task: "Task") -> Look:
    """First phase of `lint_python_files`: the file's summary, for the project model, and whether its judgement is
    deferred to the second phase, where one parse serves both its judgements. Only a training file that names a
    precision is parsed now, since its summary needs the parse; a stored result is taken as it is (a file whose
    signature is the one in the cache's index, without reading it). Last, the file's index entry now."""
    path, kind_path, project, summarize, check, cache, seen = task
    source = _Source(path, seen, cached=bool(cache))
    hit = _stored_first(cache, lambda kind: source.key(kind_path, project, summarize, kind), check, path)
    if hit is not None:
        return hit[0], hit[1], None, source.seen
    text = source.text()
    if isinstance(text, ReportError):
        return (path, [], text, None), Stage.JUDGED, None, None
    rel = kind_path or path
    words = TextWords(text, vocabulary())
    kind = file_kind(rel, words)
    if summarize and trains_in_precision(kind, words):
        findings, error, summary = _lint(text, path, kind_path, project, summarize, check)
        _store(cache, source.key(kind_path, project, summarize, check), findings, error, summary)
        return (path, findings, error, summary), Stage.JUDGED, None, source.seen
    # what `_lint` will summarise, if the file parses and its checks finish (`_finish` tells)
    summary = summarize_file(rel, words, None, False, sensitive(words)) if summarize else None
    return (path, [], None, summary), Stage.DEFERRED, (kind, words.known, summary), source.seen


def _stored(path: str, kind_path: str | None, project: ProjectContext | None, summarize: bool, check: bool | str,
            cache: str | None, seen: lint_cache.Seen | None) -> FileResult | None:
    """The stored result of a file that the cache's index shows unchanged, found without reading the file; None
    when it has none or must be read (`lint_file` then finds the same): cheap enough for the parent process."""
    entry = _index_entry(path, kind_path, project, summarize, cache, seen)
    return _cached(cache, entry(check), path)


def _index_entry(path: str, kind_path: str | None, project: ProjectContext | None, summarize: bool, cache: str | None,
                 seen: lint_cache.Seen | None) -> "Callable[[bool | str], str | None]":
    """The file's cache entry for a judgement with the rules `check` names, by the hash in the cache's index while
    the file keeps the signature recorded there; None without."""
    digest = lint_cache.unchanged(path, seen) if cache else None
    return lambda check: lint_cache.key(digest, kind_path or path, project, summarize, check) if digest else None


def _stored_look(task: "Task") -> Look | None:
    """`_first_look` of a file whose result is stored under the index's hash; None for one it must look at."""
    path, kind_path, project, summarize, check, cache, seen = task
    hit = _stored_first(cache, _index_entry(path, kind_path, project, summarize, cache, seen), check, path)
    return (hit[0], hit[1], None, seen) if hit is not None else None


def _stored_finish(task: "Task", again: ProjectContext | None, known: Known | None) -> tuple[None, FileResult] | None:
    """`_finish` of a file judged in the first phase whose judgement under `again` is stored under the index's hash."""
    path, kind_path, _, _, _, cache, seen = task
    hit = _stored(path, kind_path, again, False, "project", cache, seen) if known is None else None
    return (None, hit) if hit is not None else None


def _finish(task: "Task", again: ProjectContext | None, known: Known | None) -> tuple[FileResult | None, FileResult | None]:
    """Second phase: the deferred judgement of a file and, under `again` (the context its project's precision
    reaches it with), its judgement by the rules that read it; for a file judged in the first phase, only that."""
    path, kind_path, project, summarize, check, cache, seen = task
    if known is None:  # judged in the first phase
        return None, lint_file(path, kind_path, again, False, "project", cache, seen)
    source = _Source(path, cached=bool(cache))
    text = source.text()
    if isinstance(text, ReportError):
        return (path, [], text, None), None
    first = _first_check(check, again)
    entry = source.key(kind_path, project, summarize, first) if cache else None
    entry_again = source.key(kind_path, again, False, "project") if cache and again is not None else None
    stored = _cached(cache, entry_again, path)
    (findings, error, summary), second = _lint_twice(text, path, kind_path, project, summarize, first,
                                                     again if stored is None else None, known)
    _store(cache, entry, findings, error, summary)
    if error is not None or again is None:
        return (path, findings, error, summary), None
    if stored is None and second is not None:
        _store(cache, entry_again, second[0], second[1], None)
        stored = (path, second[0], second[1], None)
    return (path, findings, error, summary), stored


def lint_python_files(files: Sequence[Path | str], jobs: int = 0, roots: Sequence[Path | str] = (),
                      config_half: Sequence[Evidence] = (), context_files: Sequence[Path | str] = (),
                      cache: Path | None = None, launches: Mapping[str, Sequence[Launch]] | None = None,
                      config_values: ConfigValues | None = None, config_files: Sequence[Path | str] = ()) -> Report:
    """Lint `files` with `jobs` worker processes (0: one per core). Every file read is listed in `checked`. A file
    below one of the folders `roots` is judged by its path below that folder (`lint_source`'s `kind_path`).

    The files below one root are one project (files named alone, another): each file is summarised, the precision
    of the training files, and of the first training config in `config_half` that lies in the project, follows
    their imports (`lint.python.project`), and the files it reaches are judged again under it by the rules that
    read it. `context_files` are summarised for that but not reported. With `cache` (a folder), unchanged files
    are not parsed again (`lint.cache`). `launches`: by file, the shell launcher commands that start it
    (`lint.launch`); what they pass is part of its context from the first pass. `config_values`: what the YAML
    configs linted write for dtype and precision keys (`config_values.collect`), each project's part of it in the
    context of its files. `config_files`: the project's config files and shell launchers, searched for the key of an
    option that guards a finding (`lint.python.options`).

    Two phases: the first reads every file and summarises it (parsing only the training files that name a
    precision); the project model then says which files the precision reaches, and the second phase parses each
    remaining file once for both its judgements (the rules that read the project context judge a file it reaches
    only under the context it reaches it with: theirs are the findings kept). A summary taken before the parse
    assumed the file would be judged; where one was not (a syntax error), the model is built again and the files
    whose context changes are judged again under the right one."""
    named = [str(f) for f in files]
    wanted = set(named)
    extra = [str(f) for f in context_files if str(f) not in wanted]
    # What a project's requirement files and configs say is known before any file is read: it is part of every
    # file's context from the first pass.
    scopes = {Path(r): ConfigScope(Path(r), config_half, [*named, *extra], config_values) for r in roots}
    scope_of = {r: scopes[Path(r)] for r in roots}

    launches = launches or {}

    def start(p: str) -> ProjectContext | None:
        root = root_of(p, roots)
        known = scope_of[root].base(below(p, [root]) or ".") if root is not None else None
        passed = option_values(launches.get(p, ()))
        return replace(known or ProjectContext(), launch=passed, runs=runs_of(launches.get(p, ()))) if passed else known

    index = lint_cache.Index(cache, [str(r) for r in roots]) if cache is not None else None
    folder, seen = (str(cache), index.get) if index is not None else (None, lambda _: None)
    tasks: list[Task] = [(p, below(p, roots), start(p), True, True, folder, seen(p)) for p in named] \
        + [(p, below(p, roots), None, True, False, folder, seen(p)) for p in extra]
    looked = run_rest(_first_look, [(t,) for t in tasks], jobs, _stored_look, _loaded)
    tasks = _indexed(index, tasks, looked)
    reached = contexts_reached([r for r, _, _, _ in looked], roots, scopes, config_half, wanted, launches)
    first, again, base = _second_phase(tasks, looked, reached, jobs)
    if any(r[3] != f[3] for (r, stage, _, _), f in zip(looked, first) if stage is Stage.DEFERRED):
        again = _judged_again(first, tasks, again, reached, contexts_reached(first, roots, scopes, config_half, wanted, launches), jobs)
    again = _completed(tasks, again, base, jobs)
    importers = imported_by_training(first, roots)
    results = [_self_tested(_merged(first[i], again.get(first[i][0])), importers.get(first[i][0]))
               for i in chunk_order(len(first), jobs) if first[i][0] in wanted]
    return _report(_options_judged(results, roots, [*named, *extra], [str(c) for c in config_files]))


def _options_judged(results: list[FileResult], roots: Sequence[Path | str], files: list[str], configs: list[str]) -> list[FileResult]:
    """The results with each finding in code that nothing in its project runs (a class nothing builds, a function
    nothing calls), or whose code runs only with an option that nothing in its project turns on, made a note
    (`lint.python.options`). A project's files are read for it only when one of its files has a warning or an error;
    files named alone are no project, and keep their findings."""

    projects: dict[Path | str, ProjectOptions] = {}
    out = []
    for path, found, error, summary in results:
        root = root_of(path, roots) if any(f.severity is not Severity.INFO for f in found) else None
        if root is None:
            out.append((path, found, error, summary))
            continue
        if root not in projects:
            projects[root] = _project_options(root, results, files, configs)
        out.append((path, [projects[root].judged(f) for f in found], error, summary))
    return out


def _project_options(root: Path | str, results: list[FileResult], files: list[str], configs: list[str]) -> "ProjectOptions":
    """What `_options_judged` reads one project's files with: its Python files, configs, READMEs, whether it is an
    installable package, and the files that run as scripts where every file's summary is at hand (a file named only
    for context has none here: the texts are read for it then)."""
    from ampdoctor.lint.python.options import ProjectOptions
    from ampdoctor.lint.python.reach import packaged

    folder = Path(root)
    docs = sorted(str(p) for p in folder.glob("README*") if p.is_file()) if folder.is_dir() else []
    mine = [f for f in files if root_of(f, [root]) is not None]
    summaries = {p: s for p, _, _, s in results}
    known = [f for f in mine if summaries[f].script] if all(summaries.get(f) is not None for f in mine) else None
    return ProjectOptions(mine, [c for c in configs if root_of(c, [root]) is not None], lambda p, r=root: below(p, [r]) or p, docs,
                          packaged=folder.is_dir() and packaged(folder), scripts=known)


def _indexed(index: lint_cache.Index | None, tasks: list[Task], looked: list[Look]) -> list[Task]:
    """The tasks with each file's index entry as the first phase left it, and the index saved with them."""
    if index is None:
        return tasks
    index.save({t[0]: s for t, (_, _, _, s) in zip(tasks, looked) if s is not None})
    return [(*t[:6], s) for t, (_, _, _, s) in zip(tasks, looked)]


def _self_tested(result: FileResult, importer: tuple[str, int] | None) -> FileResult:
    """A module that a training file of its project imports is a library of that training: its ``__main__`` block
    (sd-scripts' pseudo-training loops that measure memory, on random tensors) is a self-test run by hand, never
    by the training, so its findings are notes, as in a test. A training script that another imports (to reuse its
    model or parser) is no such library: its `__main__` block is its own training."""
    path, found, error, summary = result
    if importer is None or not found or named_training_script(path):
        return result
    text = _read(path)
    block = main_block(text) if not isinstance(text, ReportError) else None
    if block is None:
        return result
    kind = Kind(CodeKind.TEST, f"the `__main__` block of a module that {importer[0]}:{importer[1]} imports, run by hand and "
                               "not by its training")
    inside = [judged_by_kind(f, kind) if f.location.line is not None and block[0] <= f.location.line <= block[1] else f
              for f in found]
    return path, inside, error, summary


def _second_phase(tasks: list[Task], looked: list[Look], reached: dict[str, ProjectContext],
                  jobs: int) -> tuple[list[FileResult], dict[str, FileResult], set[str]]:
    """Every file's first judgement (the deferred ones made now), by path the second judgements of the files the
    project's precision reaches, and the files whose first judgement left out the rules that read the project
    context (`_first_check`)."""
    todo = [i for i, (task, (_, stage, _, _)) in enumerate(zip(tasks, looked)) if stage is Stage.DEFERRED or task[0] in reached]
    done = dict(zip(todo, run_rest(_finish, [(tasks[i], reached.get(tasks[i][0]), looked[i][2]) for i in todo], jobs, _stored_finish, _loaded)))
    first = [done[i][0] if i in done and done[i][0] is not None else r for i, (r, _, _, _) in enumerate(looked)]
    base = {t[0] for t, (_, stage, _, _), r in zip(tasks, looked, first) if not _unjudged(r)
            and (stage is Stage.BASE or (stage is Stage.DEFERRED and _first_check(t[4], reached.get(t[0])) == "base"))}
    return first, {tasks[i][0]: done[i][1] for i in todo if done[i][1] is not None}, base


def _judged_again(first: list[FileResult], tasks: list[Task], again: dict[str, FileResult],
                  assumed: dict[str, ProjectContext], reached: dict[str, ProjectContext], jobs: int) -> dict[str, FileResult]:
    """The second judgements under the contexts of the model built from the true summaries: a file whose context
    is the one assumed keeps its judgement; the others are judged again (or not at all, if no longer reached)."""
    by_path = {t[0]: t for t in tasks}
    redo = [p for p, ctx in reached.items() if assumed.get(p) != ctx or p not in again]
    kept = {p: r for p, r in again.items() if p in reached and p not in redo}
    redone = run(lint_file, [(p, by_path[p][1], reached[p], False, "project", by_path[p][5], by_path[p][6]) for p in redo], jobs, _loaded)
    return {**kept, **{r[0]: r for r in redone}}


def _unjudged(result: FileResult) -> bool:
    """A file no rule judged: it could not be read or parsed."""
    error = result[2]
    return error is not None and error.kind in (ErrorKind.UNREADABLE, ErrorKind.SYNTAX, ErrorKind.NEWER_SYNTAX)


def _completed(tasks: list[Task], again: dict[str, FileResult], base: set[str], jobs: int) -> dict[str, FileResult]:
    """The second judgements, with one for every file in `base` (judged but for the rules that read the project
    context) that has none: no longer reached once the model was built again, or its first judgement stopped at an
    error. Those rules judge it then under its own context, as its first judgement would have."""
    todo = [(p, kind_path, project, False, "project", cache, seen)
            for p, kind_path, project, _, _, cache, seen in tasks if p in base and p not in again]
    return {**again, **{r[0]: r for r in run(lint_file, todo, jobs, _loaded)}} if todo else again


def _merged(first: FileResult, again: FileResult | None) -> FileResult:
    """The first pass's findings of the rules that do not read the project context, and the second pass's of those
    that do (its error, if it had one)."""
    if again is None:
        return first
    kept = [f for f in first[1] if f.rule_id not in project_rules()]
    return first[0], kept + again[1], again[2] or first[2], first[3]


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
