"""The registry of Python checks: one function per catalog rule, each run over one parsed file.

A check is ``fn(ctx) -> iterable of (node, message)``; it is registered with the catalog rule it reports and
the substrings without which it cannot fire (a file containing none of them is not analysed for that rule).
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

from ampdoctor.lint.python.dataflow import Dataflow
from ampdoctor.lint.python.facts import Facts
from ampdoctor.lint.python.source import SourceFile
from ampdoctor.rules import get_rule

Hit = tuple[ast.AST, str]


class Context:
    """What a check sees: the parsed file, its dataflow and file facts."""

    def __init__(self, src: SourceFile) -> None:
        self.src = src
        self._flow = Dataflow(src)
        self.facts = Facts(src, self._flow)

    @functools.cached_property
    def flow(self) -> Dataflow:
        self.facts.model_casts  # fills flow.half_models, which tensor_dtype reads
        return self._flow

    def qualname(self, node: ast.AST) -> str | None:
        return self.src.imports.qualname(node)


@dataclass(frozen=True)
class Check:
    rule: str
    # Groups of alternatives: the check can only fire on text that contains one word of every group.
    triggers: tuple[tuple[str, ...], ...]
    run: Callable[[Context], Iterable[Hit]]

    def applies(self, text: str) -> bool:
        return all(any(word in text for word in group) for group in self.triggers)


REGISTRY: list[Check] = []


def check(rule: str, *, triggers: tuple[str, ...], also: tuple[tuple[str, ...], ...] = ()) -> Callable[[Callable[[Context], Iterable[Hit]]], Callable[[Context], Iterable[Hit]]]:
    get_rule(rule)  # a typo in a rule name fails at import, not at lint time

    def register(fn: Callable[[Context], Iterable[Hit]]) -> Callable[[Context], Iterable[Hit]]:
        REGISTRY.append(Check(rule, (triggers, *also), fn))
        return fn

    return register


def all_checks() -> list[Check]:
    from ampdoctor.lint.python.checks import amp_api, rope, training  # noqa: F401  (registers)

    return REGISTRY


def calls_named(ctx: Context, names: frozenset[str] | set[str]) -> Iterator[tuple[ast.Call, str]]:
    for call in ctx.src.calls:
        name = ctx.qualname(call.func)
        if name in names:
            yield call, name
