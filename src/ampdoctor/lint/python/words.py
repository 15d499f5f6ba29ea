"""Which trigger words a source text holds, each searched for at most once.

Before any parsing, every file is asked whether each code detector's trigger words occur in it (`code_check`'s
`triggers`/`also`), whether a project context could matter (`runner.sensitive`) and whether it trains. Asked with
``word in text`` one detector at a time, the same words (a half dtype's spellings) are searched again and again,
each search a scan of the whole text: on a tree of library files that cost as much as a sixth of the lint. Here a
word's presence is remembered, and known from another word's when one contains the other: ``float16`` absent
means ``bfloat16`` absent; ``bfloat16`` present means ``float16`` present."""

from __future__ import annotations

from typing import Iterable

# Words longer than this are looked for in text + extra directly (none of the triggers is).
_LONGEST = 64


class TextWords:
    """The answers of ``word in text`` for one text, remembered."""

    __slots__ = ("text", "_memo", "_absent", "_present")

    def __init__(self, text: str) -> None:
        self.text = text
        self._memo: dict[str, bool] = {}
        self._absent: list[str] = []
        self._present: list[str] = []

    def __contains__(self, word: str) -> bool:
        found = self._memo.get(word)
        if found is None:
            found = self._search(word)
        return found

    def _search(self, word: str) -> bool:
        if any(a in word for a in self._absent):
            found = False
        elif any(word in p for p in self._present):
            found = True
        else:
            found = word in self.text
            (self._present if found else self._absent).append(word)
        self._memo[word] = found
        return found

    def plus(self, extra: str) -> "TextWords | WordsPlus":
        """The words of ``text + extra``, sharing what is known of `text`."""
        return WordsPlus(self, extra) if extra else self


class WordsPlus:
    """``word in text + extra`` without building the joined string, on a `TextWords` of text."""

    __slots__ = ("words", "extra", "edge")

    def __init__(self, words: TextWords, extra: str) -> None:
        self.words, self.extra = words, extra
        # the end of text with extra: every occurrence that is not inside text alone lies in it
        self.edge = words.text[-(_LONGEST - 1):] + extra

    def __contains__(self, word: str) -> bool:
        if len(word) > _LONGEST:
            return word in self.words.text + self.extra
        return word in self.edge or word in self.words


def holds(words: TextWords | WordsPlus, groups: Iterable[tuple[str, ...]]) -> bool:
    """One word of each group occurs (a detector's triggers, as `Detector.applies` reads them)."""
    return all(any(w in words for w in group) for group in groups)


def search_order(groups: tuple[tuple[str, ...], ...]) -> tuple[tuple[str, ...], ...]:
    """The same groups in the order that asks least: shorter words first within a group (an absent ``float16``
    answers ``bfloat16`` too), the groups with fewest words first (most likely to fail, ending the test)."""
    return tuple(sorted((tuple(sorted(g, key=len)) for g in groups), key=len))
