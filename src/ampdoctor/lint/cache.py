"""A content-hash cache of per-file lint results, as ruff keeps one: a file whose bytes, path below the project, and
project facts it was judged under are unchanged is not parsed again. The key holds everything a result depends
on: the engine (ampdoctor's own source, the Python version), the file's content and path, and the digest of the
project context it was linted under (the trainer's autocast that reaches it, the torch floor), so a change to a
training script or a requirement file re-lints exactly the files whose facts changed. Entries are plain JSON,
read strictly (`Finding.from_dict`): a cache file is data, never code, and a damaged one is a miss."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from ampdoctor.core.model import Finding
from ampdoctor.lint.python.project import Evidence, ProjectContext, Summary
from ampdoctor.report import ErrorKind, ReportError

VERSION = 1


@functools.lru_cache(maxsize=1)
def engine_key() -> str:
    """ampdoctor's own source and the interpreter: a new rule, a fixed detector or another Python (which parses
    differently) makes every entry stale."""
    digest = hashlib.sha256(f"{VERSION}:{sys.version_info[:2]}".encode())
    package = Path(__file__).resolve().parents[1]
    for path in sorted(package.rglob("*")):
        if path.suffix in (".py", ".yaml") and path.is_file():
            digest.update(path.relative_to(package).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:20]


def key(content: bytes, kind_path: str, project: ProjectContext | None, summarize: bool, check: bool | str) -> str:
    digest = hashlib.sha256(content)
    context = project.digest() if project is not None else "-"
    digest.update(f"\0{kind_path}\0{context}\0{summarize}\0{check}\0{engine_key()}".encode())
    return digest.hexdigest()


def load(folder: Path | str, entry: str, path: str) -> tuple[list[Finding], ReportError | None, Summary | None] | None:
    """The cached result for `entry`, re-pointed at `path` (a file moved with its content is the same result)."""
    try:
        # a plain join: a re-lint asks once per file, and a Path built for each is a large part of its time
        with open(os.path.join(folder, entry[:2], entry), encoding="utf-8") as f:
            data = json.loads(f.read())
        findings = [_located(Finding.from_dict(f), path) for f in data["findings"]]
        error = _error(data["error"], path) if data["error"] is not None else None
        summary = _summary(data["summary"]) if data["summary"] is not None else None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return findings, error, summary


def store(folder: Path, entry: str, findings: list[Finding], error: ReportError | None, summary: Summary | None) -> None:
    """Write atomically (a worker's entry appears whole or not at all); a cache that cannot be written is no error."""
    data = {"findings": [f.to_dict() for f in findings],
            "error": None if error is None else {**error.to_dict(), "kind": error.kind.value},
            "summary": None if summary is None else dataclasses.asdict(summary)}
    target = folder / entry[:2] / entry
    try:
        if not folder.is_dir():
            folder.mkdir(parents=True, exist_ok=True)
            (folder / ".gitignore").write_text("# made by ampdoctor lint: nothing here belongs in version control\n*\n")
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out, default=_plain)
        os.replace(tmp, target)
    except OSError:
        return


def _plain(value: Any) -> Any:
    if isinstance(value, (frozenset, set)):
        return sorted(value)
    raise TypeError(f"not JSON: {type(value).__name__}")


def _located(found: Finding, path: str) -> Finding:
    return dataclasses.replace(found, location=dataclasses.replace(found.location, file=path))


def _error(data: dict, path: str) -> ReportError:
    kind = ErrorKind(data.pop("kind"))
    error = ReportError.from_dict({**data, "file": path})
    return dataclasses.replace(error, kind=kind)


def _evidence(data: dict | None) -> Evidence | None:
    if data is None:
        return None
    return Evidence(str(data["what"]), frozenset(data["dtypes"]), str(data["file"]), int(data["line"]), str(data["through"]))


def _summary(data: dict) -> Summary:
    # JSON has no tuples: the pairs and the evidence are rebuilt, every other field is stored as it is
    evidence = {k: _evidence(data[k]) for k in ("autocast", "half_model", "half")}
    pairs = {k: tuple((str(a), int(b)) for a, b in data[k]) for k in ("imports", "configs")}
    return Summary(**{**data, **evidence, **pairs})
