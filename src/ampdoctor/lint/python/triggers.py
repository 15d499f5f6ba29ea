"""Which code detectors a file calls for, read from its text before it is parsed: a detector runs only where
one word of each of its trigger groups occurs (`code_check`'s `triggers`/`also`), in the text or in the words
the file's project context stands for (`project.project_words`). Asked of every file linted, so it is cheap:
each word is looked for once per file (`words.TextWords`)."""

from __future__ import annotations

import functools

from ampdoctor.core.registry import Detector, detectors
from ampdoctor.lint.python.kind import CodeKind, Kind
from ampdoctor.lint.python.project import PRECISION_WORDS, Evidence, ProjectContext, project_words
from ampdoctor.lint.python.words import TextWords, Vocabulary, holds, search_order


def trains_in_precision(kind: Kind, words: TextWords) -> bool:
    """A training file that names a precision: its summary needs the parsed file (`project.summarize`)."""
    return kind.kind is CodeKind.TRAINING and any(w in words for w in PRECISION_WORDS)


def checks_for(words: TextWords, project: ProjectContext | None, check: bool | str) -> list[Detector]:
    """The code detectors to run. `check`: True (all), False (none: a file summarised for context only),
    "project" (again, under the project's context: only the rules that read it; the others' findings stand) or
    "base" (all but those: a file whose project-context rules are judged under another context, `runner`).
    A detector runs when its trigger words occur in the text, or in the words its project context stands for."""
    if check is False:
        return []
    seen = words.plus(project_words(project))
    reads = None if check is True else check == "project"  # whether a rule kept reads the context (None: any)
    return [d for d, groups in code_detectors() if (reads is None or (d.rule_id in project_rules()) is reads) and holds(seen, groups)]


@functools.lru_cache(maxsize=1)
def code_detectors() -> tuple[tuple[Detector, tuple[tuple[str, ...], ...]], ...]:
    """Each code detector with its trigger groups in the order cheapest to test (`words.search_order`)."""
    return tuple((d, search_order(d.triggers)) for d in detectors("code"))


@functools.lru_cache(maxsize=1)
def vocabulary() -> Vocabulary:
    """Every word asked of a file before it is parsed."""
    # the configs written in Python are read by `embedded`, with the framework readers: imported only to lint a file
    # (a re-lint whose every result is stored imports neither)
    from ampdoctor.lint.python.embedded import CONSTRUCTOR_WORDS
    from ampdoctor.lint.python.embedded import PRECISION_WORDS as CONFIG_PRECISION_WORDS

    triggers = [w for d in detectors("code") for group in d.triggers for w in group]
    return Vocabulary([*triggers, *PRECISION_WORDS, *CONSTRUCTOR_WORDS, *CONFIG_PRECISION_WORDS])


@functools.lru_cache(maxsize=1)
def project_rules() -> frozenset[str]:
    """Rules with a detector that reads the project context: the ones judged again where it reaches."""
    return frozenset(d.rule_id for d in detectors("code") if d.project)


def sensitive(words: TextWords) -> bool:
    """Could a project context change this file's findings: would a detector that reads it run, given every word
    a context stands in for?"""
    seen = words.plus(_any_context_words())
    return any(d.project and holds(seen, groups) for d, groups in code_detectors())


@functools.lru_cache(maxsize=1)
def _any_context_words() -> str:
    any_ = Evidence("any", frozenset({"bf16"}), "", 0)
    return project_words(ProjectContext(autocast=any_, half_model=any_, half=any_, guarded=any_))
