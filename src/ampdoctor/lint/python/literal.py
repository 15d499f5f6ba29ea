"""Plain data from Python expressions, for configs written in code (`lint.python.embedded`): literals, dict literals and
``dict(...)``, names and attributes whose one assignment always runs, a dict updated key by key before its use. What
the code does not fix for certain is `UNKNOWN`, never a guess."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from ampdoctor.core.model import Location
from ampdoctor.frameworks.document import KeyPath
from ampdoctor.lint.python.dataflow import TORCH_DTYPES

if TYPE_CHECKING:
    from ampdoctor.lint.python.context import Context


class _Unknown:
    __slots__ = ()

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Any = _Unknown()


class Values:
    """Plain data from expressions, with each dict key's location; names resolve through single assignments."""

    def __init__(self, ctx: Context, file: str) -> None:
        self.ctx, self.file = ctx, file
        self.locations: dict[KeyPath, Location] = {}

    def at(self, node: ast.AST) -> Location:
        return Location(file=self.file, line=getattr(node, "lineno", None), column=getattr(node, "col_offset", -1) + 1)

    def value(self, expr: ast.AST | None, path: KeyPath, scope: ast.AST, depth: int = 0) -> Any:
        if expr is None or depth > 8:
            return UNKNOWN
        if isinstance(expr, ast.Constant):
            return expr.value
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub) and isinstance(expr.operand, ast.Constant):
            value = expr.operand.value
            return -value if isinstance(value, (int, float)) and not isinstance(value, bool) else UNKNOWN
        if isinstance(expr, (ast.Dict, ast.Call)):
            return self.mapping(expr, path, scope, depth)
        if isinstance(expr, (ast.List, ast.Tuple)):
            return [self.value(e, (*path, i), scope, depth + 1) for i, e in enumerate(expr.elts)]
        if isinstance(expr, (ast.Name, ast.Attribute)):
            return self.named(expr, path, scope, depth)
        return UNKNOWN

    def named(self, expr: ast.Name | ast.Attribute, path: KeyPath, scope: ast.AST, depth: int) -> Any:
        dtype = TORCH_DTYPES.get(self.ctx.qualname(expr) or "")
        if dtype is not None:
            return next(iter(dtype))
        value = self.sole_value(expr, scope)
        if not isinstance(value, (ast.Constant, ast.Attribute, ast.Name, ast.UnaryOp)):
            return UNKNOWN  # a dict or list bound to a name may be changed in place: only `mapping_named` reads one
        return self.value(value, path, scope, depth + 1)

    def mapping(self, expr: ast.Dict | ast.Call, path: KeyPath, scope: ast.AST, depth: int) -> Any:
        """A dict literal or ``dict(a=1)`` with literal keys; anything else (``**other`` that does not resolve) is unknown."""
        out: dict[Any, Any] = {}
        if isinstance(expr, ast.Call):
            if not (isinstance(expr.func, ast.Name) and expr.func.id == "dict") or expr.args:
                return UNKNOWN
            pairs = [(kw.arg, kw, kw.value) for kw in expr.keywords]
        else:
            pairs = [(k.value if isinstance(k, ast.Constant) else UNKNOWN, k, v) if k is not None else (None, v, v)
                     for k, v in zip(expr.keys, expr.values)]
        for key, where, value in pairs:
            if key is None:  # ``**other``
                merged = self.mapping_named(value, path, scope, depth + 1)
                if not isinstance(merged, dict):
                    return UNKNOWN
                out.update(merged)
                continue
            if key is UNKNOWN or isinstance(key, _Unknown):
                return UNKNOWN
            self.locations[(*path, key)] = self.at(where)
            out[key] = self.value(value, (*path, key), scope, depth + 1)
        return out

    def mapping_named(self, expr: ast.AST, path: KeyPath, scope: ast.AST, depth: int = 0) -> Any:
        """A dict given by name: its one assignment in scope, with the plain key assignments made to it before
        `expr` at the same level of its block (``ds_config["bf16"] = {...}``); one under a branch makes the key unknown."""
        if isinstance(expr, (ast.Dict, ast.Call)):
            return self.mapping(expr, path, scope, depth)
        if not isinstance(expr, ast.Name):
            return UNKNOWN
        value = self.sole_value(expr, scope)
        if not isinstance(value, (ast.Dict, ast.Call)):
            return UNKNOWN
        if self._handed_on(expr, scope, value.lineno):
            return UNKNOWN
        data = self.mapping(value, path, scope, depth + 1)
        if isinstance(data, dict):
            self._apply_updates(data, expr, path, scope, value.lineno)
        return data

    def _handed_on(self, use: ast.Name, scope: ast.AST, bound_at: int) -> bool:
        """Whether the dict may have been changed otherwise than key by key before `use`: a method called on it
        (``cfg.update(...)``, ``cfg["bf16"].pop(...)``), it or a part of it passed to a call, a key that is no literal."""
        consumer = self.ctx.src.parents.get(use)
        if isinstance(consumer, ast.keyword):
            consumer = self.ctx.src.parents.get(consumer)
        for call in self.ctx.src.calls:
            if not (bound_at <= call.lineno <= use.lineno) or call is consumer or self.ctx.src.scope(call) is not scope:
                continue
            func = call.func
            receiver = func.value if isinstance(func, ast.Attribute) and func.attr not in _READING_METHODS else None
            operands = [receiver, *call.args, *(kw.value for kw in call.keywords)]
            if any(_rooted_at(o, use.id) for o in operands if o is not None):
                return True
        for node in self.ctx.src.assigns:
            if isinstance(node, ast.Assign) and bound_at < node.lineno < use.lineno and any(
                    _rooted_at(t, use.id) and isinstance(t, ast.Subscript) and _subscript_keys(t, use.id) is None for t in node.targets):
                return True
        return False

    def sole_value(self, expr: ast.Name | ast.Attribute, scope: ast.AST) -> ast.expr | None:
        """The one value ever assigned to a name or attribute, when that assignment always runs: not a parameter's
        default (a caller may pass another), not under a branch or loop (``args.bf16 = True`` under an ``if``)."""
        bindings = self.ctx.src.bindings(expr, scope)
        if len(bindings) != 1 or bindings[0][1] is None or bindings[0][1] is expr:
            return None
        value = bindings[0][1]
        statement = self.ctx.src.parents.get(value)
        if statement is None or isinstance(statement, ast.arguments) or under_branch(self.ctx, statement, self.ctx.src.scope(statement)):
            return None
        return value

    def _apply_updates(self, data: dict, use: ast.Name, path: KeyPath, scope: ast.AST, bound_at: int) -> None:
        for node in self.ctx.src.assigns:
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and bound_at < node.lineno < use.lineno):
                continue
            keys = _subscript_keys(node.targets[0], use.id)
            if not keys or self.ctx.src.scope(node) is not scope:
                continue
            node_scope = scope
            conditional = under_branch(self.ctx, node, node_scope)
            target = data
            for key in keys[:-1]:
                target = target.setdefault(key, {}) if isinstance(target, dict) else None
                if not isinstance(target, dict):
                    break
            if isinstance(target, dict):
                full = (*path, *keys)
                self.locations[full] = self.at(node.targets[0])
                target[keys[-1]] = UNKNOWN if conditional else self.value(node.value, full, scope)


_READING_METHODS = frozenset({"get", "keys", "items", "values", "copy"})


def _rooted_at(expr: ast.AST, name: str) -> bool:
    """``cfg``, ``cfg["bf16"]``, ``cfg.get`` rooted at the name `name`."""
    while isinstance(expr, (ast.Subscript, ast.Attribute, ast.Starred)):
        expr = expr.value
    return isinstance(expr, ast.Name) and expr.id == name


def _subscript_keys(target: ast.AST, name: str) -> list[Any] | None:
    """``cfg["bf16"]["enabled"]`` on `name` -> ["bf16", "enabled"]; None for anything else."""
    keys: list[Any] = []
    while isinstance(target, ast.Subscript):
        if not isinstance(target.slice, ast.Constant):
            return None
        keys.append(target.slice.value)
        target = target.value
    return keys[::-1] if isinstance(target, ast.Name) and target.id == name and keys else None


_BRANCHES = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.IfExp, ast.Match) if hasattr(ast, "Match") else (
    ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.IfExp)


def under_branch(ctx: Context, node: ast.AST, scope: ast.AST) -> bool:
    for parent in ctx.src.ancestors(node):
        if parent is scope:
            return False
        if isinstance(parent, _BRANCHES):
            return True
    return False
