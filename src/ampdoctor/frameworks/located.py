"""Located documents: a parsed config plus the file/line/column of every key path in it.

Every framework reader works on a `Document`, whatever the syntax (JSON, YAML, TOML, shell env), so that a
finding can point at the exact key that decided a dtype. Parsing problems are returned as
`ReportError` values carrying the parser's own line/column; nothing here raises on bad input.
"""

from __future__ import annotations

import bisect
import codecs
import json
import re
import stat
from json.decoder import scanstring
from pathlib import Path
from typing import Any, Iterator, Mapping

import yaml

from ampdoctor.core import Location
from ampdoctor.frameworks.document import Document, Key, KeyPath, iter_leaves, merge_documents
from ampdoctor.frameworks.located_env import load_env, looks_like_env
from ampdoctor.frameworks.located_toml import load_toml
from ampdoctor.report import ErrorKind, ReportError

# Re-exported: readers import the document model and its helpers from here.
__all__ = ["Document", "Key", "KeyPath", "iter_leaves", "load_documents", "merge_documents"]
# A YAML key that is no scalar (a mapping or list used as a key): not locatable, so its keys are skipped.
_MISSING = object()

# --- reading files -----------------------------------------------------------------------------------


def file_kind(mode: int) -> str:
    """What a file that is no regular file is, in words (from its `st_mode`)."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def read_text(path: Path) -> tuple[str | None, ReportError | None]:
    try:
        mode = path.stat().st_mode
        if not stat.S_ISREG(mode):
            # Reading a FIFO blocks until a writer comes, /dev/zero never ends: only regular files are configs.
            return None, ReportError(str(path), f"{file_kind(mode)}, not a config file; not read")
        raw = path.read_bytes()
    except OSError as exc:
        return None, ReportError(str(path), f"cannot read: {exc.strerror or exc}", kind=ErrorKind.UNREADABLE)
    except ValueError as exc:  # a NUL byte in the name
        return None, ReportError(str(path), f"cannot read: {exc}", kind=ErrorKind.UNREADABLE)
    try:
        return raw.decode(_bom_codec(raw)), None
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        return None, ReportError(str(path), f"not UTF-8 text ({exc.reason})", line, exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1)


def _bom_codec(raw: bytes) -> str:
    """The codec a text file's byte-order mark names (Windows tools write JSON in UTF-16 with one, which Python's
    `json.loads` of the bytes reads); UTF-8, its BOM optional, otherwise."""
    if raw.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):
        return "utf-32"
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    return "utf-8-sig"


def syntax_of(path: Path, text: str) -> str:
    """JSON, YAML, TOML or env, from the name where it says, otherwise from the content."""
    suffix = path.suffix.lower()
    if suffix == ".json":
        return "json"
    if suffix == ".toml":
        return "toml"
    if suffix in (".yaml", ".yml"):
        return "yaml"
    if suffix == ".env" or path.name.endswith(".env") or path.name.startswith(".env"):
        return "env"
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        return "json"
    if looks_like_env(text):
        return "env"
    return "yaml"


def load_documents(path: Path, text: str | None = None) -> tuple[list[Document], ReportError | None]:
    """Parse a file into its documents (a YAML file may hold several); malformed input gives an ReportError."""
    if text is None:
        text, error = read_text(path)
        if error is not None:
            return [], error
    assert text is not None
    syntax = syntax_of(path, text)
    if syntax == "json" and not text.strip():
        return [], ReportError(str(path), "empty: nothing to check", fatal=False, kind=ErrorKind.NOT_A_CONFIG)
    try:
        if syntax == "json":
            docs, error = load_json(text, str(path))
            if error is not None and _TEMPLATE.search(text):
                return [], ReportError(str(path), "a template (its {{ }} / {% %} placeholders are filled in before it is read): not checked",
                                       error.line, error.column, fatal=False, kind=ErrorKind.NOT_A_CONFIG)
            if error is not None and _json_lines(text):
                return [], ReportError(str(path), "JSON Lines (one JSON value per line): data, not a config; not checked",
                                       fatal=False, kind=ErrorKind.NOT_A_CONFIG)
            return docs, error
        if syntax == "env":
            return load_env(text, str(path))
        if syntax == "toml":
            return load_toml(text, str(path))
        return load_yaml(text, str(path))
    except RecursionError:
        return [], ReportError(str(path), f"{syntax} nested too deeply to read")
    except Exception as exc:  # noqa: BLE001 - a parser bug must become an input error, never a traceback
        return [], ReportError(str(path), f"cannot parse {syntax}: {type(exc).__name__}: {exc}")


def _json_lines(text: str) -> bool:
    """Is the text JSON Lines (two or more lines, each one JSON value): a dataset saved under a .json name? Read up
    to the first line that is not: a broken config fails on its first or second line."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2:
        return False
    for line in lines:
        try:
            json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            return False
    return True


# Jinja/Go-template markup: a JSON file with it is a template a launcher renders, not the config that runs.
_TEMPLATE = re.compile(r"\{\{[^{}\n]*\}\}|\{%[^%\n]*%\}")


# --- JSON --------------------------------------------------------------------------------------------

_JSON_ATOM = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null|NaN|-?Infinity")
_JSON_WS = re.compile(r"[ \t\n\r]*")


class _LineIndex:
    def __init__(self, text: str) -> None:
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def location(self, file: str, offset: int) -> Location:
        line = bisect.bisect_right(self.starts, offset)
        return Location(file=file, line=line, column=offset - self.starts[line - 1] + 1)


class _LazyLocations(Mapping[KeyPath, Location]):
    """Key locations computed on first use: most JSON files in a tree (tokenizers, datasets, package.json)
    are no training config, and scanning a 13 MB tokenizer.json for positions took seconds."""

    def __init__(self, text: str, file: str) -> None:
        self._text, self._file = text, file
        self._locations: dict[KeyPath, Location] | None = None

    def _loaded(self) -> dict[KeyPath, Location]:
        if self._locations is None:
            self._locations = _json_locations(self._text, self._file)
            self._text = ""
        return self._locations

    def __getitem__(self, key: KeyPath) -> Location:
        return self._loaded()[key]

    def __iter__(self) -> Iterator[KeyPath]:
        return iter(self._loaded())

    def __len__(self) -> int:
        return len(self._loaded())


def load_json(text: str, file: str) -> tuple[list[Document], ReportError | None]:
    """`json.loads` semantics (last duplicate key wins) plus the line/column of every key."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return [], ReportError(file, f"invalid JSON: {exc.msg}", exc.lineno, exc.colno)
    return [Document(file, "json", data, _LazyLocations(text, file))], None


def jsonc_documents(text: str, file: str) -> list[Document] | None:
    """The documents of a JSON text with comments, read as JSONC readers (TypeScript's tsconfig, editors' settings)
    read it: ``//`` and ``/* */`` comments and trailing commas dropped. None when the text has no comment, or does not
    parse even so."""
    stripped = _without_comments(text)
    if stripped is None:
        return None
    docs, error = load_json(_TRAILING_COMMA.sub(r"\1", stripped), file)
    return None if error is not None else docs


# A comma before a closing bracket, outside strings (comments are gone by then; a string holding ",}" is kept whole).
_TRAILING_COMMA = re.compile(r'("(?:[^"\\]|\\.)*")|,(?=\s*[}\]])')
_COMMENT_OR_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|//[^\n]*|/\*.*?\*/', re.S)


def _without_comments(text: str) -> str | None:
    """`text` with its comments blanked (newlines kept, so that lines stay where they were); None when it has none."""
    found = False

    def blank(m: re.Match[str]) -> str:
        nonlocal found
        if m.group().startswith('"'):
            return m.group()
        found = True
        return re.sub(r"[^\n]", " ", m.group())

    out = _COMMENT_OR_STRING.sub(blank, text)
    return out if found else None


def _json_locations(text: str, file: str) -> dict[KeyPath, Location]:
    """The line/column of every key (and list item) of a valid JSON text."""
    index = _LineIndex(text)
    locs: dict[KeyPath, Location] = {}

    def ws(i: int) -> int:
        return _JSON_WS.match(text, i).end()  # type: ignore[union-attr]

    def value(i: int, path: KeyPath) -> int:
        i = ws(i)
        c = text[i]
        if c == "{":
            i = ws(i + 1)
            if text[i] == "}":
                return i + 1
            while True:
                i = ws(i)
                key, end = scanstring(text, i + 1)
                locs[path + (key,)] = index.location(file, i)
                i = ws(end) + 1  # past ':'
                i = ws(value(i, path + (key,)))
                if text[i] == ",":
                    i += 1
                    continue
                return i + 1
        if c == "[":
            i = ws(i + 1)
            if text[i] == "]":
                return i + 1
            k = 0
            while True:
                i = ws(i)
                locs[path + (k,)] = index.location(file, i)
                i = ws(value(i, path + (k,)))
                k += 1
                if text[i] == ",":
                    i += 1
                    continue
                return i + 1
        if c == '"':
            return scanstring(text, i + 1)[1]
        match = _JSON_ATOM.match(text, i)
        return match.end() if match else i + 1

    value(0, ())
    return locs


# --- YAML --------------------------------------------------------------------------------------------


class _Loader(yaml.SafeLoader):
    """SafeLoader that reads application tags (`!Ref x`, `!!python/name:...`) as plain data instead of failing:
    a CloudFormation template or an mkdocs.yml in the tree is not an error, just not a training config."""


def _construct_tagged(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node, deep=True)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_scalar(node)


_Loader.add_multi_constructor("!", _construct_tagged)
_Loader.add_multi_constructor("tag:yaml.org,2002:python/", _construct_tagged)

_MAX_YAML_NODES = 200_000


def load_yaml(text: str, file: str) -> tuple[list[Document], ReportError | None]:
    try:
        loader = _Loader(text)  # the reader refuses unprintable characters (U+0084, ESC...) before any parsing
    except yaml.reader.ReaderError as exc:
        where = _LineIndex(text).location(file, min(max(exc.position, 0), len(text)))
        return [], ReportError(file, f"invalid YAML: character U+{exc.character:04X} is not allowed in YAML (unprintable)", where.line, where.column)
    docs: list[Document] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            expanded = _expanded_size(node, {}, set())
            if expanded > _MAX_YAML_NODES:
                # A "billion laughs" file: every reader walks the constructed data, where each alias is a copy.
                return [], ReportError(file, f"YAML aliases expand to more than {_MAX_YAML_NODES:,} nodes; not read")
            data = loader.construct_document(node)
            locs: dict[KeyPath, Location] = {}
            _yaml_locations(node, data, (), locs, file, set(), [0])
            docs.append(Document(file, "yaml", data, locs))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "malformed YAML"
        return [], ReportError(file, f"invalid YAML: {problem}", mark.line + 1 if mark else None, mark.column + 1 if mark else None)
    except yaml.YAMLError as exc:
        return [], ReportError(file, f"invalid YAML: {exc}")
    except (ValueError, TypeError, OverflowError) as exc:  # e.g. a timestamp like 2024-02-30
        return [], ReportError(file, f"invalid YAML value: {exc}")
    finally:
        loader.dispose()
    return docs, None


def _expanded_size(node: yaml.Node, sizes: dict[int, int], active: set[int]) -> int:
    """The number of nodes the document has once its aliases are expanded, computed once per node (memoised), so a
    file of 364 bytes that expands to 10**9 nodes is measured in microseconds. A self-referencing alias counts as
    unbounded."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in active:
        return _MAX_YAML_NODES + 1
    active.add(key)
    total = 1
    if isinstance(node, yaml.MappingNode):
        children = [n for pair in node.value for n in pair]
    elif isinstance(node, yaml.SequenceNode):
        children = node.value
    else:
        children = []
    for child in children:
        total += _expanded_size(child, sizes, active)
        if total > _MAX_YAML_NODES:
            break
    active.discard(key)
    sizes[key] = total
    return total


def _yaml_locations(node: yaml.Node, data: Any, path: KeyPath, locs: dict[KeyPath, Location], file: str,
                    active: set[int], budget: list[int]) -> None:
    # Aliases make the node graph a DAG or even a cycle: guard both, so a "billion laughs" file stays cheap.
    budget[0] += 1
    if id(node) in active or budget[0] > _MAX_YAML_NODES:
        return
    active.add(id(node))
    try:
        if isinstance(node, yaml.MappingNode) and isinstance(data, dict):
            for knode, vnode in node.value:
                key = _scalar_key(knode)
                if key is _MISSING:
                    continue
                try:
                    if key not in data:
                        continue
                except TypeError:
                    continue
                locs[path + (key,)] = Location(file=file, line=knode.start_mark.line + 1, column=knode.start_mark.column + 1)
                _yaml_locations(vnode, data[key], path + (key,), locs, file, active, budget)
        elif isinstance(node, yaml.SequenceNode) and isinstance(data, list):
            for k, (vnode, item) in enumerate(zip(node.value, data)):
                locs[path + (k,)] = Location(file=file, line=vnode.start_mark.line + 1, column=vnode.start_mark.column + 1)
                _yaml_locations(vnode, item, path + (k,), locs, file, active, budget)
    finally:
        active.discard(id(node))


_KEY_LOADER = _Loader("")


def _scalar_key(node: yaml.Node) -> Any:
    if not isinstance(node, yaml.ScalarNode):
        return _MISSING
    try:
        return _KEY_LOADER.construct_object(node, deep=True)
    except Exception:  # noqa: BLE001 - an odd key is simply not located
        return _MISSING


