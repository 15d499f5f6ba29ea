"""Silences one detector in every Python process of a mutation run; `bench/mutation.py` copies this file as
``sitecustomize.py`` into a temporary folder that it puts first on ``PYTHONPATH``, so the pytest process and
every ``python -m ampdoctor`` a test spawns (with the environment it inherits) import it at start-up.

``AMPDOCTOR_MUTANT=RULE:KIND:NAME`` names the detector: a registered one (``AMP004:code:grad_scaler_with_bf16``,
``NAME`` the detector function's name) or a rule's catalog signatures (``AMP004:explain:signatures``). Nothing is
imported at start-up: an import hook patches ``ampdoctor.core.registry`` (the silenced detector keeps its
registration, name and source location but yields nothing) or ``ampdoctor.explain`` (the rule's signatures match
no text) right after the module runs. ``AMPDOCTOR_MUTANT_LOG``, when set, is a file that gets one line per
process in which the silenced detector was asked: the proof that the silencing was reached.

No production code knows about this: the registry's ``_load`` and explain's ``_score`` are looked up at call time.
"""

from __future__ import annotations

import functools
import importlib.machinery
import os
import sys
from typing import Any, Callable

MUTANT = os.environ.get("AMPDOCTOR_MUTANT", "")
LOG = os.environ.get("AMPDOCTOR_MUTANT_LOG", "")
_asked = False


def _note_asked() -> None:
    global _asked
    if LOG and not _asked:
        _asked = True
        with open(LOG, "a", encoding="utf-8") as out:
            out.write(f"{os.getpid()} {MUTANT}\n")


class _Silenced:
    """Stands for a detector function: same name and code object (so `Detector.where` is unchanged), no hits."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__module__ = fn.__module__
        self.__doc__ = fn.__doc__
        self.__code__ = fn.__code__

    def __call__(self, *args: Any, **kwargs: Any) -> tuple[()]:
        _note_asked()
        return ()


def _silence_registry(module: Any) -> None:
    from dataclasses import replace

    rule_id, kind, name = MUTANT.split(":")
    original = module._load

    @functools.lru_cache(maxsize=1)
    def _load() -> tuple[Any, ...]:
        return tuple(replace(d, fn=_Silenced(d.fn)) if (d.rule_id, d.kind, d.fn.__name__) == (rule_id, kind, name) else d
                     for d in original())

    module._load = _load


def _silence_signatures(module: Any) -> None:
    rule_id = MUTANT.split(":")[0]
    original = module._score

    def _score(rule: Any, text: str) -> Any:
        if rule.id == rule_id:
            _note_asked()
            return None
        return original(rule, text)

    module._score = _score


class _PatchAfterImport:
    """A meta-path finder that lets the usual finder load one module, then patches it."""

    def __init__(self, patches: dict[str, Callable[[Any], None]]) -> None:
        self.patches = patches

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        patch = self.patches.get(fullname)
        if patch is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        run_module = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            run_module(module)
            patch(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]  # this spec's loader only
        return spec


if MUTANT.count(":") == 2:
    _target = "ampdoctor.explain" if MUTANT.split(":")[1] == "explain" else "ampdoctor.core.registry"
    _patch = _silence_signatures if _target == "ampdoctor.explain" else _silence_registry
    sys.meta_path.insert(0, _PatchAfterImport({_target: _patch}))
