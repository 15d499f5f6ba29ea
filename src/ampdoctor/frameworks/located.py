"""Located documents: a parsed config plus the file/line/column of every key path in it.

Every framework reader works on a `Document`, whatever the syntax (JSON, YAML, shell env), so that a
finding can point at the exact key that decided a dtype. Parsing problems are returned as
`ReportError` values carrying the parser's own line/column; nothing here raises on bad input.
"""

from __future__ import annotations

import bisect
import json
import re
import shlex
import stat
from dataclasses import dataclass, field
from json.decoder import scanstring
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import yaml

from ampdoctor.report import ErrorKind, ReportError
from ampdoctor.rules import Location

Key = Any  # a mapping key (usually str) or a list index
KeyPath = tuple[Key, ...]
_MISSING = object()


@dataclass
class Document:
    """One configuration document. `data` is plain Python data; `locations` maps each key path to
    where its key (for list items: its value) is written. Merged documents keep each key's own file."""

    file: str
    syntax: str  # "json", "yaml" or "env"
    data: Any
    locations: Mapping[KeyPath, Location] = field(default_factory=dict)
    text: str = ""  # the raw text, kept for env files (flags inside a variable are located in it)

    def get(self, *path: Key, default: Any = None) -> Any:
        node = self.data
        for key in path:
            if isinstance(node, Mapping) and key in node:
                node = node[key]
            elif isinstance(node, list) and isinstance(key, int) and -len(node) <= key < len(node):
                node = node[key]
            else:
                return default
        return node

    def has(self, *path: Key) -> bool:
        return self.get(*path, default=_MISSING) is not _MISSING

    def at(self, *path: Key) -> Location:
        """Where `path` is written; for a missing key, its nearest written ancestor (or the file itself)."""
        for end in range(len(path), 0, -1):
            loc = self.locations.get(tuple(path[:end]))
            if loc is not None:
                return loc
        return Location(file=self.file)

    def keys(self) -> list[Any]:
        return list(self.data) if isinstance(self.data, Mapping) else []

    def sub(self, *path: Key) -> "Document":
        """The document rooted at `path` (locations re-keyed), e.g. the DeepSpeed blocks inside a NeoX config."""
        n = len(path)
        locs = {k[n:]: v for k, v in self.locations.items() if k[:n] == tuple(path) and len(k) > n}
        return Document(self.file, self.syntax, self.get(*path, default={}), locs)

    def with_overrides(self, values: Mapping[KeyPath, tuple[Any, Location]]) -> "Document":
        """A copy where each key path is set to a value written elsewhere (DeepSpeed "auto" filled in by
        the launcher that points at it); the location is the launcher's key."""
        data = _deep_copy(self.data)
        locs = dict(self.locations)
        for path, (value, loc) in values.items():
            node = data
            for key in path[:-1]:
                if not isinstance(node, dict):
                    break
                node = node.setdefault(key, {})
            if isinstance(node, dict):
                node[path[-1]] = value
                locs[tuple(path)] = loc
        return Document(self.file, self.syntax, data, locs)


def merge_documents(docs: Iterable[Document], file: str, normalize: Any = None) -> Document:
    """Top-level keys of several documents in one; later documents win; each key keeps its own location.
    `normalize` maps a top-level key to its canonical spelling (NeoX treats `a-b` and `a_b` alike)."""
    data: dict[Any, Any] = {}
    locs: dict[KeyPath, Location] = {}
    for doc in docs:
        if not isinstance(doc.data, Mapping):
            continue
        for key, value in doc.data.items():
            canon = normalize(key) if normalize else key
            data[canon] = value
            for path, loc in doc.locations.items():
                if path and path[0] == key:
                    locs[(canon,) + path[1:]] = loc
    return Document(file, "yaml", data, locs)


def _deep_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


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
        return raw.decode("utf-8-sig"), None
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        return None, ReportError(str(path), f"not UTF-8 text ({exc.reason})", line, exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1)


def syntax_of(path: Path, text: str) -> str:
    """JSON, YAML or env, from the name where it says, otherwise from the content."""
    suffix = path.suffix.lower()
    if suffix == ".json":
        return "json"
    if suffix in (".yaml", ".yml"):
        return "yaml"
    if suffix == ".env" or path.name.endswith(".env") or path.name.startswith(".env"):
        return "env"
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        return "json"
    if _looks_like_env(text):
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
    try:
        if syntax == "json":
            return load_json(text, str(path))
        if syntax == "env":
            return load_env(text, str(path))
        return load_yaml(text, str(path))
    except RecursionError:
        return [], ReportError(str(path), f"{syntax} nested too deeply to read")
    except Exception as exc:  # noqa: BLE001 - a parser bug must become an input error, never a traceback
        return [], ReportError(str(path), f"cannot parse {syntax}: {type(exc).__name__}: {exc}")


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


# --- shell env files ---------------------------------------------------------------------------------

_ASSIGN = re.compile(r"^(?P<indent>\s*)(?:export\s+)?(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>.*)$")
_VAR = re.compile(r"\$(?:\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?::?[-=][^}]*)?\}|(?P<plain>[A-Za-z_][A-Za-z0-9_]*))")


def _looks_like_env(text: str) -> bool:
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    return bool(lines) and all(_ASSIGN.match(ln) for ln in lines[:5])


def load_env(text: str, file: str) -> tuple[list[Document], ReportError | None]:
    """A sourced shell file: `[export] NAME=value` lines with shell quoting, `$VAR` expansion of names
    defined earlier, values that continue over lines while a quote is open. Other shell lines are ignored."""
    data: dict[str, str] = {}
    locs: dict[KeyPath, Location] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        match = _ASSIGN.match(lines[i])
        if match is None:
            i += 1
            continue
        start = i
        raw = match["value"]
        while True:
            value = _shell_value(raw, data)
            if value is not None:
                break
            i += 1
            if i >= len(lines):
                column = len(match["indent"]) + len(match["name"]) + 2 + (len(lines[start]) - len(lines[start].lstrip()) - len(match["indent"]))
                return [], ReportError(file, f"unterminated quote in the value of {match['name']}", start + 1, column)
            raw += "\n" + lines[i]
        name = match["name"]
        data[name] = value
        locs[(name,)] = Location(file=file, line=start + 1, column=lines[start].index(name) + 1)
        i += 1
    return [Document(file, "env", data, locs, text)], None


def _shell_value(raw: str, defined: Mapping[str, str]) -> str | None:
    """The value a shell assigns, or None while a quote is still open."""
    text = raw.rstrip()
    if text.endswith("\\") and not text.endswith("\\\\"):
        return None
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        tokens = list(lexer)
    except ValueError:
        return None
    words: list[str] = []
    for token in tokens:
        if token and set(token) <= set(";&|"):
            break
        words.append(token)
    # A shell assigns only the first word; a quoted value is one word.
    value = words[0] if words else ""
    if "'" not in raw.split("#", 1)[0][:1]:
        value = _VAR.sub(lambda m: defined.get(m["braced"] or m["plain"], ""), value)
    return value


def iter_leaves(doc: Document) -> Iterator[tuple[KeyPath, Any]]:
    """Every (key path, scalar value) in the document."""

    def walk(node: Any, path: KeyPath, depth: int) -> Iterator[tuple[KeyPath, Any]]:
        if depth > 50:
            return
        if isinstance(node, Mapping):
            for k, v in node.items():
                yield from walk(v, path + (k,), depth + 1)
        elif isinstance(node, list):
            for k, v in enumerate(node):
                yield from walk(v, path + (k,), depth + 1)
        else:
            yield path, node

    yield from walk(doc.data, (), 0)
