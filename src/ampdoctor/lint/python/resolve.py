"""Import resolution and identifier helpers shared by every check.

`Imports` maps the names a file binds with ``import``/``from ... import`` to canonical dotted names, so that
``T.autocast``, ``from torch import autocast`` and ``torch.amp.autocast`` all resolve to ``torch.autocast``.
Resolution is flow-insensitive (every import in the file counts, wherever it is) and never imports user code.
Relative imports are left unresolved: a file inside a package that defines its own ``autocast`` is not torch's.
"""

from __future__ import annotations

import ast
import functools
import re

# Re-exports and submodules that name the same object; canonical names are the public torch spellings.
ALIASES = {
    "torch.amp.autocast": "torch.autocast",
    "torch.amp.autocast_mode.autocast": "torch.autocast",
    "torch.cuda.amp.autocast_mode.autocast": "torch.cuda.amp.autocast",
    "torch.cpu.amp.autocast_mode.autocast": "torch.cpu.amp.autocast",
    "torch.amp.grad_scaler.GradScaler": "torch.amp.GradScaler",
    "torch.cuda.amp.grad_scaler.GradScaler": "torch.cuda.amp.GradScaler",
    "torch.cuda.amp.autocast_mode.custom_fwd": "torch.cuda.amp.custom_fwd",
    "torch.cuda.amp.autocast_mode.custom_bwd": "torch.cuda.amp.custom_bwd",
    "torch.amp.autocast_mode.custom_fwd": "torch.amp.custom_fwd",
    "torch.amp.autocast_mode.custom_bwd": "torch.amp.custom_bwd",
    "torch.autograd.function.Function": "torch.autograd.Function",
    "torch.nn.functional.softmax": "torch.softmax",
    "torch.special.softmax": "torch.softmax",
    "torch.nn.functional.log_softmax": "torch.log_softmax",
    "torch.special.log_softmax": "torch.log_softmax",
    "torch.functional.einsum": "torch.einsum",
    "torch.distributed.fsdp.fully_sharded_data_parallel.MixedPrecision": "torch.distributed.fsdp.MixedPrecision",
    "torch.distributed.fsdp.api.MixedPrecision": "torch.distributed.fsdp.MixedPrecision",
    "torch.distributed._composable.fsdp.MixedPrecisionPolicy": "torch.distributed.fsdp.MixedPrecisionPolicy",
    "torch.distributed.fsdp._fully_shard.MixedPrecisionPolicy": "torch.distributed.fsdp.MixedPrecisionPolicy",
    "torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler": "torch.distributed.fsdp.ShardedGradScaler",
}


class Imports:
    """Local name -> canonical dotted name, for the absolute imports of one module."""

    __slots__ = ("names", "_known")

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        # qualname's answers by node: the rules of a file ask of the same calls and attributes again and again
        # (each check that looks for a callee reads every call of the file)
        self._known: dict[ast.AST, str | None] = {}

    def add(self, node: ast.Import | ast.ImportFrom) -> None:
        self._known.clear()  # an import read later may root a chain that resolved to nothing
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    self.names[alias.asname] = alias.name
                else:
                    head = alias.name.split(".", 1)[0]
                    self.names[head] = head
        elif node.level == 0 and node.module:
            for alias in node.names:
                if alias.name != "*":
                    self.names[alias.asname or alias.name] = f"{node.module}.{alias.name}"

    def qualname(self, node: ast.AST) -> str | None:
        """Canonical dotted name of a Name/Attribute chain rooted in an import, else None."""
        known = self._known.get(node, self)
        if known is not self:
            return known  # type: ignore[return-value]
        found = self._known[node] = self._resolve(node)
        return found

    def _resolve(self, node: ast.AST) -> str | None:
        # Asked of most calls and attributes of a file, many times over, and most chains (``self.proj``, ``x.view``)
        # start at no import: their root is looked up before any list or string is built.
        base = node
        while isinstance(base, ast.Attribute):
            base = base.value
        root = self.names.get(base.id) if isinstance(base, ast.Name) else None
        if root is None:
            return None
        chain = _chain(node)
        assert chain is not None
        name = ".".join((root, *chain[1:]))
        return ALIASES.get(name, name)


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def words(identifier: str) -> list[str]:
    """Lower-case word pieces of an identifier, in order: ``build_model`` -> [build, model]; ``getNet`` -> [get, net]."""
    return [t for t in _CAMEL.sub("_", identifier).lower().split("_") if t]


@functools.lru_cache(maxsize=1 << 14)  # asked of the same identifiers over and over (every call's name, by several rules)
def tokens(identifier: str) -> frozenset[str]:
    """Lower-case word pieces of an identifier: ``cos_cached`` -> {cos, cached}; ``invFreq`` -> {inv, freq}."""
    return frozenset(words(identifier))


# "rotary" or "rope", with the dimensions some carry (``rope3``, ``rotary1d``: `tokens` keeps digits on the word)
_ROTARY_WORD = re.compile(r"(?:rotary|rope)(?:\d+d?)?")
# The end of a run of capitals before a capitalised word (``GPTNeoXRotary``: "X" | "Rotary"), which `words` keeps
# together ("xrotary")
_ACRONYM_END = re.compile(r"(?<=[A-Z])(?=[A-Z][a-z])")


def names_rotary(identifier: str) -> bool:
    """An identifier that names a rotary embedding: ``RotaryEmbedding``, ``build_rope``, ``apply_rotary_pos_emb``, and
    the paper's own spelling ``LlamaRoPE`` / ``RoPEScaling``, which camel-case splitting would cut into "ro" and "pe",
    the dimensioned ones (``Rope3D``, ``rotary2d``), whose digits `tokens` keeps on the word, and those after an
    acronym (``GPTNeoXRotaryEmbedding``)."""
    spaced = _ACRONYM_END.sub("_", identifier.replace("RoPE", "_rope_"))
    return any(_ROTARY_WORD.fullmatch(t) for t in tokens(spaced))


def node_words(node: ast.AST) -> frozenset[str]:
    """The word pieces a name, an attribute or a string constant says (`tokens`); nothing for any other node."""
    if isinstance(node, ast.Name):
        return tokens(node.id)
    if isinstance(node, ast.Attribute):
        return tokens(node.attr)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return tokens(node.value)
    return frozenset()


def last_identifier(node: ast.AST) -> str | None:
    """``self.rotary.cos_cached`` -> ``cos_cached``; ``f(x)`` -> ``f``; ``x[0]`` -> ``x``."""
    while True:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Attribute):
            return node.attr
        if isinstance(node, (ast.Call,)):
            node = node.func
        elif isinstance(node, ast.Subscript):
            node = node.value
        else:
            return None


def method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    """The method `name` a class body defines (not one it inherits): its last definition, the one Python keeps."""
    return next((f for f in reversed(cls.body) if isinstance(f, ast.FunctionDef) and f.name == name), None)


def is_dataclass(cls: ast.ClassDef) -> bool:
    """Is the class decorated ``@dataclass`` or ``@dataclass(...)`` (however imported)?"""
    return any(last_identifier(d) == "dataclass" for d in cls.decorator_list)


def self_attribute(node: ast.AST | None) -> str | None:
    """``self.proj`` -> "proj"; None for anything else (``self.a.b``, ``other.proj``)."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def dotted(node: ast.AST) -> str | None:
    """Source text of a plain Name/Attribute chain (``self.cos_cached``), else None; used as a dataflow key."""
    chain = _chain(node)
    return ".".join(chain) if chain else None


def _chain(node: ast.AST) -> list[str] | None:
    """``a.b.c`` as ``["a", "b", "c"]`` when the node is a plain Name/Attribute chain, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]


def access_path(expr: ast.AST | None) -> tuple[str, ...]:
    """The names an expression is reached by, indexing and calls left out: ``self.model.layers[0]`` -> (self, model,
    layers), ``w.t()`` -> (w, t); () when it does not start from a name."""
    names: list[str] = []
    while isinstance(expr, (ast.Attribute, ast.Subscript, ast.Call)):
        if isinstance(expr, ast.Attribute):
            names.append(expr.attr)
        expr = expr.func if isinstance(expr, ast.Call) else expr.value
    return (expr.id, *reversed(names)) if isinstance(expr, ast.Name) else ()


def keyword(call: ast.Call, name: str) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def has_star_kwargs(call: ast.Call) -> bool:
    return any(kw.arg is None for kw in call.keywords) or any(isinstance(a, ast.Starred) for a in call.args)


def argument(call: ast.Call, position: int, name: str) -> ast.expr | None:
    """The argument bound to parameter `name` at `position` (keyword wins)."""
    value = keyword(call, name)
    if value is None and len(call.args) > position and not any(isinstance(a, ast.Starred) for a in call.args[: position + 1]):
        value = call.args[position]
    return value

