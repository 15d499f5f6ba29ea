"""`Document`: one parsed configuration and where each of its keys is written, whatever the syntax it came from
(the loaders are `located` for JSON and YAML, `located_env` for shell env files, `located_toml` for TOML)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping

from ampdoctor.core import Location

Key = Any  # a mapping key (usually str) or a list index
KeyPath = tuple[Key, ...]
_MISSING = object()


@dataclass(frozen=True)
class OwnSaid:
    """What a project's own Python says of its configs, beyond the keys it declares (`embedded.own_code`): where its
    model-loading code defaults the load dtype to half (`Document.own_load_default`), and where it switches a
    DeepSpeed config's precision itself (`Document.own_engine_precision`)."""

    load_default: str | None = None
    engine_precision: str | None = None


@dataclass
class Document:
    """One configuration document. `data` is plain Python data; `locations` maps each key path to
    where its key (for list items: its value) is written. Merged documents keep each key's own file."""

    file: str
    syntax: str  # "json", "yaml", "toml" or "env"
    data: Any
    locations: Mapping[KeyPath, Location] = field(default_factory=dict)
    text: str = ""  # the raw text, kept for env files (flags inside a variable are located in it)
    # Top-level keys whose meaning the project defines itself (fields its own subclass of a framework's argument
    # class adds): a reader does not take such a key for the framework's key of the same name.
    own_keys: frozenset[str] = frozenset()
    # Where the project's own model-loading code defaults the load dtype to a half dtype ("file:line"), if it does: a
    # config that sets no load dtype then gets that code's default, not the framework's fp32.
    own_load_default: str | None = None
    # Where the project's own code switches a DeepSpeed config's fp16/bf16 block itself ("file:line"), if it does
    # (``ds_config["bf16"]["enabled"] = args.bf16``): the switch a DeepSpeed file writes is then not what its engine runs.
    own_engine_precision: str | None = None

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
        return Document(self.file, self.syntax, data, locs, own_keys=self.own_keys, own_load_default=self.own_load_default,
                        own_engine_precision=self.own_engine_precision)


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
