"""TOML configs (torchtitan job files) as located documents: values as `tomllib` reads them, and the line/column of
every table header and key, found by a scan of the text (tomllib keeps no positions)."""

from __future__ import annotations

import re
import sys
from typing import Any

from ampdoctor.core import Location
from ampdoctor.frameworks.document import Document, KeyPath
from ampdoctor.report import ReportError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 has the same parser as the tomli package
    import tomli as tomllib

_HEADER = re.compile(r"^\s*(\[\[?)\s*(?P<key>[^\[\]]+?)\s*\]\]?\s*(?:#.*)?$")
_ASSIGN = re.compile(r"^\s*(?P<key>[A-Za-z0-9_\-]+(?:\s*\.\s*[A-Za-z0-9_\-]+)*|\"[^\"]*\"|'[^']*')\s*=")
_AT = re.compile(r"\(at line (?P<line>\d+), column (?P<column>\d+)\)")


def _parts(key: str) -> KeyPath:
    """A dotted TOML key as a key path (quoted parts keep their dots)."""
    return tuple(p.strip().strip("\"'") for p in re.findall(r"\"[^\"]*\"|'[^']*'|[^.]+", key))


def _locations(text: str, file: str) -> dict[KeyPath, Location]:
    locs: dict[KeyPath, Location] = {}
    table: KeyPath = ()
    arrays: dict[KeyPath, int] = {}
    in_string = False
    for number, line in enumerate(text.splitlines(), 1):
        if not in_string:
            table = _locate_line(line, number, file, table, arrays, locs)
        if line.count('"""') % 2 or line.count("'''") % 2:
            in_string = not in_string  # a multi-line string opens or closes here: the lines inside are no keys
    return locs


def _locate_line(line: str, number: int, file: str, table: KeyPath, arrays: dict[KeyPath, int], locs: dict[KeyPath, Location]) -> KeyPath:
    """Record the header or key this line writes; the table that later keys belong to."""
    header = _HEADER.match(line)
    if header:
        table = _parts(header["key"])
        if header.group(1) == "[[":
            arrays[table] = arrays.get(table, -1) + 1
            table = (*table, arrays[table])
        locs.setdefault(table, Location(file=file, line=number, column=line.index("[") + 1))
        return table
    assign = _ASSIGN.match(line)
    if assign:
        locs.setdefault((*table, *_parts(assign["key"])), Location(file=file, line=number, column=assign.start("key") + 1))
    return table


def load_toml(text: str, file: str) -> tuple[list[Document], ReportError | None]:
    try:
        data: Any = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        at = _AT.search(str(exc))
        message = _AT.sub("", str(exc)).strip()
        return [], ReportError(file, f"invalid TOML: {message}", int(at["line"]) if at else None, int(at["column"]) if at else None)
    return [Document(file, "toml", data, _locations(text, file), text)], None
