"""The values a project's YAML configs give the keys that name a dtype or a precision, for code that reads one of
them from its config object (``DTYPES[cfg.fsdp.reduce_dtype]``, ``configs["dtype"]``, ``cfg.get("reduce_dtype")``).

The table is made once per lint from the documents the config linter has already parsed (`collect`; no file is
read again) and travels, per project, in the context of each of its files (`ProjectContext.config_values`). Its
`repr` is a hash of its content, so the lint cache's key of every file of the project changes when a value, or
the line it is written on, does. The code side (`key_path`) turns a config read into its key path; `lookup`
matches that path against the table."""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from ampdoctor.dtypes import ALIASES, PRECISION_MODES

# A key whose value the table keeps whatever it holds (a null, an interpolation ``${...}``): code that reads it is
# then known to read something no constant says.
_KEY_WORDS = ("dtype", "precision")
# A key that switches autocast (``disable_first_stage_autocast: true``, ``use_autocast: false``): the table keeps its
# value, a YAML boolean written as "true"/"false", for code that passes it as autocast's `enabled`.
_SWITCH_WORDS = ("autocast",)
# Bounds: a project of thousands of configs keeps at most this many values, and a document is walked this deep.
MAX_VALUES = 20_000
_MAX_DEPTH = 32


@dataclass(frozen=True)
class ConfigValue:
    """One value a YAML config writes: its mapping keys from the top (list positions left out), the value as written
    (a string or None), and where its key is written (the file below the project, and the line)."""

    path: tuple[str, ...]
    value: str | None
    file: str
    line: int

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class ConfigValues:
    """The values of a project's YAML configs, by the last key of their path."""

    values: tuple[ConfigValue, ...]
    _by_key: dict[str, list[ConfigValue]] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        for value in self.values:
            self._by_key.setdefault(value.path[-1], []).append(value)

    def __repr__(self) -> str:
        # part of every file's cache key (`ProjectContext.digest`): a hash of the content, computed once
        made = self.__dict__.get("_repr")
        if made is None:
            digest = hashlib.sha256(repr(self.values).encode()).hexdigest()[:16]
            made = f"ConfigValues({len(self.values)}, {digest})"
            object.__setattr__(self, "_repr", made)
        return made

    def __getstate__(self) -> dict:
        return {"values": self.values}

    def __setstate__(self, state: dict) -> None:
        object.__setattr__(self, "values", state["values"])
        object.__setattr__(self, "_by_key", {})
        self.__post_init__()

    def lookup(self, path: tuple[str, ...]) -> list[ConfigValue]:
        """The values written for the longest suffix of `path` that some config has, of at least its last key and
        that key's parent where `path` has one (``cfg.fsdp.reduce_dtype`` matches ``fsdp: {reduce_dtype: ...}``
        anywhere in a config, not a bare ``reduce_dtype`` of another block)."""
        candidates = self._by_key.get(path[-1], []) if path else []
        for length in range(len(path), min(2, len(path)) - 1, -1):
            tail = path[-length:]
            found = [v for v in candidates if v.path[-length:] == tail]
            if found:
                return found
        return []

    def within(self, rel: Callable[[str], str | None]) -> "ConfigValues":
        """The values whose files `rel` places below a project (`rel(file)`: the file's path below it, or None),
        named so."""
        placed = [(value, rel(value.file)) for value in self.values]
        return ConfigValues(tuple(ConfigValue(v.path, v.value, where, v.line) for v, where in placed if where is not None))


def _names_dtype(value: str) -> bool:
    key = value.strip().lower()
    key = key[len("torch."):] if key.startswith("torch.") else key
    return key in ALIASES or key in PRECISION_MODES


def collect(documents: Iterable[Any]) -> ConfigValues:
    """The values of the YAML `documents` (`frameworks.document.Document`) that name a dtype, and every value of a
    key that says dtype or precision, or that switches autocast."""
    out: list[ConfigValue] = []
    for doc in documents:
        if doc.syntax != "yaml":
            continue
        for path, value in _leaves(doc.data):
            keys = tuple(k for k in path if isinstance(k, str))
            value = _kept(keys, value)
            if value is not False:
                loc = doc.locations.get(path)
                out.append(ConfigValue(keys, value, loc.file if loc is not None and loc.file else doc.file,
                                       loc.line if loc is not None and loc.line else 1))
                if len(out) >= MAX_VALUES:
                    return ConfigValues(tuple(out))
    return ConfigValues(tuple(out))


def _kept(keys: tuple[str, ...], value: Any) -> str | None | bool:
    """The value the table keeps for a leaf at `keys`: a short string that names a dtype, any value of a dtype or
    precision key, a switch of autocast as "true"/"false"; False for a leaf it does not keep."""
    if not keys:
        return False
    last = keys[-1].lower()
    if isinstance(value, bool) and any(w in last for w in _SWITCH_WORDS):
        value = "true" if value else "false"
    if not (value is None or (isinstance(value, str) and len(value) < 64)):
        return False
    if (value is not None and _names_dtype(value)) or any(w in last for w in (*_KEY_WORDS, *_SWITCH_WORDS)):
        return value
    return False


def _leaves(data: Any) -> list[tuple[tuple, Any]]:
    """The scalar values below the top of a document, each with its key path (to `_MAX_DEPTH` keys)."""
    out: list[tuple[tuple, Any]] = []
    todo: list[tuple[tuple, Any]] = [((), data)]
    while todo:
        path, node = todo.pop()
        if isinstance(node, dict):  # what a YAML loader builds (an abstract Mapping check costs more than the walk)
            if len(path) < _MAX_DEPTH:
                todo.extend(((*path, k), v) for k, v in node.items())
        elif isinstance(node, list):
            if len(path) < _MAX_DEPTH:
                todo.extend(((*path, i), v) for i, v in enumerate(node))
        elif path:
            out.append((path, node))
    out.reverse()  # in the order they are written
    return out


# Names whose attributes are an object's own state, not a config it was given: ``self.cfg.reduce_dtype`` reads the
# config `cfg`, so both are dropped from the path.
_OWNERS = frozenset({"self", "cls"})


def key_path(node: ast.AST) -> tuple[str, ...] | None:
    """The keys a config read follows below the config object: ``cfg.fsdp.reduce_dtype`` -> (fsdp, reduce_dtype),
    ``configs["dtype"]`` -> (dtype,), ``cfg.get("reduce_dtype", "fp32")`` -> (reduce_dtype,), an option kept flat
    under its dotted name ``getattr(opts, "fsdp.reduce_dtype")`` -> (fsdp, reduce_dtype); None for anything else."""
    parts: list[str] = []
    while True:
        if _getattr_of_name(node):
            assert isinstance(node, ast.Call)
            parts.extend(reversed(node.args[1].value.split(".")))  # type: ignore[attr-defined]
            node = node.args[0]
        elif isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            parts.append(node.slice.value)
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args \
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            parts.append(node.args[0].value)
            node = node.func.value
        else:
            break
    if not isinstance(node, ast.Name) or not parts:
        return None
    parts.reverse()
    if node.id in _OWNERS:
        parts = parts[1:]
    return tuple(parts) or None


def _getattr_of_name(node: ast.AST) -> bool:
    """``getattr(obj, "a.b")`` (with or without a default) of a constant, non-empty option name."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" \
        and len(node.args) in (2, 3) and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str) \
        and all(node.args[1].value.split("."))


def stored_keys(assigns: Iterable[ast.AST]) -> frozenset[str]:
    """The last keys of the config reads a file assigns to (``configs["dtype"] = args.dtype``): a value its code sets
    is not only what the configs say."""
    out: set[str] = set()
    for node in assigns:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        for target in targets:
            if isinstance(target, (ast.Attribute, ast.Subscript)):
                path = key_path(target)
                if path:
                    out.add(path[-1])
    return frozenset(out)

