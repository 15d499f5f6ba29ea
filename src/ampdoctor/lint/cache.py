"""A content-hash cache of per-file lint results, as ruff keeps one: a file whose bytes, path below the project, and
project facts it was judged under are unchanged is not parsed again. The key holds everything a result depends
on: the engine (ampdoctor's own source, the Python version), the file's content and path, and the digest of the
project context it was linted under (the trainer's autocast that reaches it, the torch floor), so a change to a
training script or a requirement file re-lints exactly the files whose facts changed. Entries are plain JSON,
read strictly (`Finding.from_dict`): a cache file is data, never code, and a damaged one is a miss.

So that a re-lint does not read and hash every file again, an index (`Index`, one file per set of folders linted)
keeps each file's stat signature with the hash of its content, as git's index does: a file whose size, times, inode
and device are those recorded is taken to hold the content recorded. A file changed within `RACY_NS` of its being
read could change again without its signature changing (the time stamps' granularity), so it is not recorded and is
hashed again next time ("racy git"). The signature only stands in for reading the file; every entry's key is the
hash of the bytes that were linted."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import stat
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ampdoctor.core.model import Finding
from ampdoctor.lint.python.project import Evidence, ProjectContext, Summary
from ampdoctor.report import ErrorKind, ReportError

VERSION = 2
# A file whose inode changed (ctime) this long or less before it was read is not recorded in the index: a change
# within the time stamps' granularity (a tick of the kernel's clock; 2 s on FAT) would leave its signature as it was.
RACY_NS = 3_000_000_000
# size, mtime, ctime, inode, device: a write, a rename over it or a `touch` changes one (ctime cannot be set back)
Signature = tuple[int, int, int, int, int]
# an index entry: the signature a file had when it was read, and the hash of what was read
Seen = tuple[Signature, str]


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


def key(content: str, kind_path: str, project: ProjectContext | None, summarize: bool, check: bool | str) -> str:
    """The entry for a file whose bytes hash to `content` (`content_hash`), judged as `kind_path` under `project`."""
    context = project.digest() if project is not None else "-"
    return hashlib.sha256(f"{content}\0{kind_path}\0{context}\0{summarize}\0{check}\0{engine_key()}".encode()).hexdigest()


def content_hash(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def signature(st: os.stat_result) -> Signature:
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev


def read(path: str) -> tuple[bytes, str, Seen | None]:
    """A file's bytes, their hash and the index entry that records them: None when the file changed too recently
    to be told apart from a later change by its signature (`RACY_NS`). Raises OSError."""
    now = time.time_ns()
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())  # before the read: a change after it shows in the next signature
        raw = f.read()
    digest = content_hash(raw)
    settled = max(st.st_mtime_ns, st.st_ctime_ns) < now - RACY_NS and stat.S_ISREG(st.st_mode)
    return raw, digest, (signature(st), digest) if settled else None


def unchanged(path: str, seen: Seen | None) -> str | None:
    """The content hash of the file at `path` if it still has the signature recorded in `seen`, without reading it."""
    if seen is None:
        return None
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return seen[1] if signature(st) == seen[0] else None


class Index:
    """The index of one set of folders linted (and the working folder, which relative paths are read from): by
    path, the `Seen` entry of each file linted from it last time. A damaged or missing index is an empty one."""

    def __init__(self, folder: Path, roots: list[str]) -> None:
        name = hashlib.sha256("\0".join([os.getcwd(), *sorted(os.path.abspath(r) for r in roots)]).encode()).hexdigest()[:20]
        self.file = folder / "index" / f"{name}.json"
        self.entries: dict[str, Seen] = {}
        try:
            with open(self.file, encoding="utf-8") as f:
                data = json.loads(f.read())
            if data.get("version") == VERSION:
                self.entries = {str(p): (tuple(int(n) for n in e[:5]), str(e[5])) for p, e in data["files"].items()}  # type: ignore[misc]
        except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
            self.entries = {}

    def get(self, path: str) -> Seen | None:
        entry = self.entries.get(path)
        return entry if entry is not None and len(entry[0]) == 5 else None

    def save(self, entries: dict[str, Seen]) -> None:
        """Replace the index with `entries` (the files of this run), unless that is what it holds already."""
        if entries == self.entries:
            return
        data = {"version": VERSION, "files": {p: [*sig, digest] for p, (sig, digest) in entries.items()}}
        try:
            _write(self.file, data)
        except OSError:
            return


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
    try:
        _write(folder / entry[:2] / entry, data)
    except OSError:
        return


def _write(target: Path, data: dict) -> None:
    folder = target.parents[1]
    if not folder.is_dir():
        folder.mkdir(parents=True, exist_ok=True)
        (folder / ".gitignore").write_text("# made by ampdoctor lint: nothing here belongs in version control\n*\n")
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(data, out, default=_plain)
    os.replace(tmp, target)


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
    return Evidence(str(data["what"]), frozenset(data["dtypes"]), str(data["file"]), int(data["line"]), str(data["through"]),
                    bool(data["casts_weights"]), bool(data["autocasts"]), frozenset(data["classes"]), str(data.get("only_with", "")), str(data.get("device", "")))


def _summary(data: dict) -> Summary:
    # JSON has no tuples: the pairs and the evidence are rebuilt, every other field is stored as it is
    evidence = {k: _evidence(data[k]) for k in ("autocast", "half_model", "half")}
    pairs = {k: tuple((str(a), int(b)) for a, b in data[k]) for k in ("imports", "configs")}
    names = {k: tuple(map(str, data[k])) for k in ("model_classes", "helpers")}
    return Summary(**{**data, **evidence, **pairs, **names})
