"""Which files of the projects linted their precision reaches, and with which context (`project.ProjectModel`
over the files' summaries); and where a file lies below the folders linted."""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path, PurePosixPath

from ampdoctor.core.model import Finding
from ampdoctor.lint.launch import Launch
from ampdoctor.lint.pins import torch_floor
from ampdoctor.lint.python.config_values import ConfigValues
from ampdoctor.lint.python.project import Evidence, ProjectContext, ProjectModel, Summary
from ampdoctor.report import ErrorKind, ReportError

# One file's outcome: its path, findings, the error that kept it from being (fully) checked, and its summary.
FileResult = tuple[str, list[Finding], "ReportError | None", "Summary | None"]


def contexts_reached(results: list[FileResult], roots: Sequence[Path | str], scopes: Mapping[Path, ConfigScope],
             config_half: Sequence[Evidence], wanted: set[str],
             launches: Mapping[str, Sequence[Launch]] | None = None) -> dict[str, ProjectContext]:
    """The files to judge again, each with the context its project's precision reaches it with. `scopes`: by root,
    which of its configs govern which files. `launches`: by file, the commands of the shell launchers that start
    it (`lint.launch.launched_scripts`)."""
    out: dict[str, ProjectContext] = {}
    for root, group in projects(results, roots).items():
        half = [e for e in config_half if root is None or root_of(e.file, [root])]
        whole = root is not None and all(r[3] is not None or cannot_run(r) for r in group)
        unparsed = {rel: r[0] for r in group if cannot_run(r) and root is not None and (rel := below(r[0], [root])) is not None}
        out.update(_contexts(group, scopes.get(root) if root is not None else None, half, wanted, whole, root, launches or {}, unparsed))
    return out


def cannot_run(result: FileResult) -> bool:
    """A file that no Python 3 can compile (a syntax error that is not newer syntax: mixed tabs and spaces,
    Python 2, a NUL byte; or bytes that do not decode as its coding line, else UTF-8, says, which Python refuses as a
    SyntaxError before it parses anything) runs nothing and imports nothing as it stands: a folder is still whole
    without its summary, and the project model reads its text for what it may do once fixed
    (`ProjectModel.unparsed`). One that could not be read, or is in syntax newer than this Python's, may run
    anything, and leaves the folder partial."""
    error = result[2]
    if error is None:
        return False
    return error.kind is ErrorKind.SYNTAX or (error.kind is ErrorKind.UNREADABLE and _undecodable(result[0]))


def _undecodable(path: str) -> bool:
    """Does the file read, but not decode as Python decodes source (`importlib.util.decode_source`: its coding line
    or BOM, else UTF-8)? Asked only of a file that could not be read as text."""
    try:
        raw = Path(path).read_bytes()
    except OSError:
        return False
    try:
        importlib.util.decode_source(raw)
    except (UnicodeDecodeError, SyntaxError, LookupError):
        return True
    return False


def _signs_text(raw: bytes) -> str:
    """The text of a file Python cannot decode, as far as its bytes go (UTF-8, undecodable bytes replaced): enough
    for the signs the project model looks for in a file that does not compile (the ASCII of `autocast`, a
    ``Trainer(``)."""
    return raw.decode("utf-8", errors="replace")


def _contexts(results: list[FileResult], scope: ConfigScope | None, half: list[Evidence],
              wanted: set[str], folder: bool, root: Path | None,
              launches: Mapping[str, Sequence[Launch]], unparsed: Mapping[str, str]) -> dict[str, ProjectContext]:
    """The files of one project that its precision reaches, with the context of each; `unparsed`: the files that do
    not compile, by their path below the project."""
    summaries, by_rel = _summaries(results)
    rel_of = {path: rel for rel, path in by_rel.items()}
    # the launchers' files named below the project, as its Python files are
    launched = {rel_of[path]: [replace(launch, file=(below(Path(launch.file), [root]) if root is not None else None) or launch.file)
                               for launch in found] for path, found in launches.items() if path in rel_of}

    def text_of(rel: str) -> str | None:
        try:
            raw = Path(by_rel.get(rel) or unparsed[rel]).read_bytes()
        except (OSError, KeyError):
            return None
        try:
            return importlib.util.decode_source(raw)
        except (UnicodeDecodeError, SyntaxError, LookupError):
            return _signs_text(raw) if rel in unparsed else None

    model = ProjectModel(summaries, half, torch_floor=scope.floor if scope is not None else None,
                         base_of=scope.base if scope is not None else None, folder=folder, text_of=text_of, launches=launched,
                         packaged=root is not None and packaged(root), unparsed=tuple(sorted(unparsed)))
    return {by_rel[rel]: ctx for rel, ctx in model.contexts().items() if by_rel[rel] in wanted}


def packaged(root: Path) -> bool:
    """Is the folder an installable package (its functions are called by its users' code, not only its own)?
    A setup.py or setup.cfg, or a pyproject.toml that names a project or a build system (not one that only configures
    tools)."""
    if (root / "setup.py").is_file() or (root / "setup.cfg").is_file():
        return True
    try:
        text = (root / "pyproject.toml").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return any(section in text for section in ("[project]", "[build-system]", "[tool.poetry]"))


class ConfigScope:
    """Which of a project's half-precision training configs govern which of its files, and the base context each
    file is first judged with (the oldest torch the project allows, the bf16 config and the half dtypes of the
    configs governing it). A config governs the code below the nearest folder, from its own upward, that holds
    Python code of the project: a folder of YAML files configures the code around it, and a benchmark's config, in a
    repository of independent benchmarks, that benchmark alone. A config at the top governs every file, as does one
    whose folders up to the top hold no code. What reaches a file from a config elsewhere (a script that names it,
    a launcher that passes it) is the project model's, along imports. A package nested in the project (a folder below
    the top with a setup.py or a pyproject.toml of its own: a vendored evaluation kit, a library the repository ships)
    is a project of its own: the configs outside it govern none of its code, which runs as its own users run it."""

    def __init__(self, root: Path, config_half: Sequence[Evidence], code: Iterable[Path | str],
                 values: ConfigValues | None = None) -> None:
        self.floor = torch_floor(root)
        # the values the project's own YAML configs write (`config_values`), their files named below the root
        mine = values.within(lambda file: below(file, [root])) if values is not None else None
        self.values = mine if mine is not None and mine.values else None
        folders = {PurePosixPath(".")}
        for path in code:
            rel = below(path, [root])
            if rel is not None:
                folders.update(PurePosixPath(rel).parents)
        # the folders below the top that are installable packages of their own (`packaged`)
        self._nested = frozenset(f for f in folders if f != PurePosixPath(".") and packaged(root / f))
        self._owned: list[tuple[PurePosixPath, Evidence]] = []
        for evidence in config_half:
            rel = below(evidence.file, [root])
            if rel is None:
                continue
            owner = PurePosixPath(rel).parent
            while owner not in folders:
                owner = owner.parent
            self._owned.append((owner, replace(evidence, file=rel)))
        self._by_folder: dict[PurePosixPath, ProjectContext] = {}

    def base(self, rel: str) -> ProjectContext:
        """The context the file at `rel` (below the root) is first judged with, from the configs that govern it (their
        files named below the root): one object per folder, so its digest is kept."""
        folder = PurePosixPath(rel).parent
        if folder not in self._by_folder:
            mine = [e for owner, e in self._owned if (owner == folder or owner in folder.parents) and not self._apart(owner, folder)]
            bf16 = next((e for e in mine if "bf16" in e.dtypes), None)
            dtypes = frozenset().union(*(e.dtypes for e in mine))
            self._by_folder[folder] = ProjectContext(torch_floor=self.floor, trains_bf16=bf16, precisions=dtypes,
                                                     config_values=self.values,
                                                     config_autocast=next((e for e in mine if e.autocasts), None))
        return self._by_folder[folder]

    def _apart(self, owner: PurePosixPath, folder: PurePosixPath) -> bool:
        """Is there a nested package between the config's folder `owner` and the file's `folder` (the file's own
        folder or one above it, below `owner`): the config is the outer project's, the file the nested one's."""
        return any(p in self._nested and owner in p.parents for p in (folder, *folder.parents))


def projects(results: list[FileResult], roots: Sequence[Path | str]) -> dict[Path | None, list[FileResult]]:
    out: dict[Path | None, list[FileResult]] = {}
    as_path = {root: Path(root) for root in roots}
    for r in results:
        root = root_of(r[0], roots)
        out.setdefault(as_path[root] if root is not None else None, []).append(r)
    return out


def root_of(path: Path | str, roots: Sequence[Path | str]) -> Path | str | None:
    """The first of `roots` that `path` lies below (as `Path.relative_to` has it: by whole parts)."""
    placed = _placed(path, roots)
    return placed[0] if placed is not None else None


def below(path: Path | str, roots: Sequence[Path | str]) -> str | None:
    """`path` below the first of `roots` it lies below, in POSIX form ("." for the root itself)."""
    placed = _placed(path, roots)
    return placed[1] if placed is not None else None


def _placed(path: Path | str, roots: Sequence[Path | str]) -> tuple[Path | str, str] | None:
    parts = _parts(path)
    for root in roots:
        start = _parts(root)
        if _under(parts, start):
            return root, "/".join(parts[len(start):]) or "."
    return None


def _under(parts: tuple[str, ...], start: tuple[str, ...]) -> bool:
    # A root of no parts ("." or "") holds every relative path and no absolute one.
    return parts[:len(start)] == start if start else not (parts and parts[0].startswith("/"))


@functools.lru_cache(maxsize=1 << 16)
def _parts(path: Path | str) -> tuple[str, ...]:
    # Every file of a run is placed several times (its project, its path below it, its first context): parsing a
    # path into parts is most of a re-lint's own time when each place builds a Path again.
    return Path(path).parts


def imported_by_training(results: list[FileResult], roots: Sequence[Path | str]) -> dict[str, tuple[str, int]]:
    """Each file of a linted folder that a training file of the same folder imports: its path -> (the importer,
    below the folder, and the line of the import). Only training files that name a precision carry their imports in
    their summaries, so only those are read as importers."""
    out: dict[str, tuple[str, int]] = {}
    for root, group in projects(results, roots).items():
        if root is None:
            continue  # files named alone are no project
        summaries, by_rel = _summaries(group)
        model = ProjectModel(summaries)
        for rel, summary in sorted(summaries.items()):
            for dotted, line in summary.imports:
                target = model.resolve(rel, dotted)
                if target is not None and target != rel and by_rel[target] not in out:
                    out[by_rel[target]] = (rel, line)
    return out


def _summaries(results: list[FileResult]) -> tuple[dict[str, Summary], dict[str, str]]:
    """The summaries of a project's files by their path below it, and each such path's file as linted."""
    summarised = [r for r in results if r[3] is not None]
    return {r[3].path: r[3] for r in summarised}, {r[3].path: r[0] for r in summarised}
