"""Which trigger words a source text holds, each searched for at most once.

Before any parsing, every file is asked whether each code detector's trigger words occur in it (`code_check`'s
`triggers`/`also`), whether a project context could matter (`runner.sensitive`) and whether it trains. Asked with
``word in text`` one detector at a time, the same words (a half dtype's spellings) are searched again and again,
each search a scan of the whole text: on a tree of library files that cost as much as a sixth of the lint. Here a
word's presence is remembered, and known from another word's when one contains the other: ``float16`` absent
means ``bfloat16`` absent; ``bfloat16`` present means ``float16`` present. A `Vocabulary` knows these relations
for the words asked most, and a piece several of them share (``f16``), looked for first: absent, it answers for
all of them with one search.

Most words asked are spelled in identifier characters only (``autocast``, ``GradScaler``, ``float16``). Such a word
occurs in a text exactly when it occurs in one of the text's maximal runs of identifier characters, so it is looked
for in the text's distinct runs, joined: about a fifth of a library file's length (modeling files repeat their
names). A word with other characters in it (``.half()``) is absent when one of its identifier pieces is; otherwise
the text itself is searched."""

from __future__ import annotations

import re
from typing import Iterable

# Words longer than this are looked for in text + extra directly (none of the triggers is).
_LONGEST = 64

# Every byte that is not an ASCII identifier character becomes a space: `bytes.split()` then gives the runs.
_RUNS = bytes(c if chr(c).isascii() and (chr(c).isalnum() or c == 0x5F) else 0x20 for c in range(256))
_PIECE = re.compile(r"[A-Za-z0-9_]+")
# word -> (the word as bytes if it is all identifier characters, else None; its identifier pieces as bytes)
_SHAPES: dict[str, tuple[bytes | None, tuple[bytes, ...]]] = {}


def _shape(word: str) -> tuple[bytes | None, tuple[bytes, ...]]:
    shape = _SHAPES.get(word)
    if shape is None:
        whole = word.isascii() and _PIECE.fullmatch(word) is not None
        pieces = tuple(p.encode() for p in _PIECE.findall(word)) if word.isascii() else ()
        shape = _SHAPES[word] = (word.encode() if whole else None, pieces)
    return shape


class Vocabulary:
    """Words with what answers for each: its gate (`gates_for`) and the other words inside it, absent -> it is
    absent; the words it lies inside, present -> it is present."""

    __slots__ = ("gates", "inside", "around")

    def __init__(self, words: Iterable[str], least: int = 3) -> None:
        words = set(words)
        self.gates = gates_for(words, least)
        known = words | set(self.gates.values())
        self.inside = {w: tuple(v for v in known if v != w and v in w) for w in known}
        self.around = {w: tuple(v for v in known if v != w and w in v) for w in known}


# What a `TextWords` has learnt of its text: the words looked for (found or not) and the text's identifier runs.
Known = tuple[dict[str, bool], "bytes | None"]


class TextWords:
    """The answers of ``word in text`` for one text, remembered."""

    __slots__ = ("text", "_memo", "_vocabulary", "_runs")

    def __init__(self, text: str, vocabulary: Vocabulary | None = None, known: "Known | None" = None) -> None:
        self.text = text
        self._memo: dict[str, bool] = dict(known[0]) if known else {}
        self._vocabulary = vocabulary if vocabulary is not None else _NO_WORDS
        self._runs: bytes | None = known[1] if known else None

    def __contains__(self, word: str) -> bool:
        found = self._memo.get(word)
        if found is None:
            found = self._search(word)
        return found

    def _search(self, word: str) -> bool:
        memo, vocabulary = self._memo, self._vocabulary
        gate = vocabulary.gates.get(word)
        if gate is not None and gate not in self:  # looked for even when not asked: its absence answers for many
            memo[word] = False
            return False
        for piece in vocabulary.inside.get(word, ()):
            if memo.get(piece) is False:
                memo[word] = False
                return False
        for whole in vocabulary.around.get(word, ()):
            if memo.get(whole):
                memo[word] = True
                return True
        found = memo[word] = self._in_text(word)
        return found

    def _in_text(self, word: str) -> bool:
        whole, pieces = _shape(word)
        runs = self._runs
        if runs is None:
            # the distinct runs, each once: a word inside one is inside no separator
            runs = self._runs = b"\n".join(set(self.text.encode("utf-8", "surrogatepass").translate(_RUNS).split()))
        if whole is not None:
            return whole in runs
        for piece in pieces:
            if piece not in runs:
                return False
        return word in self.text

    @property
    def known(self) -> "Known":
        """What was looked for so far, and found or not, with the text's runs if made: to go on from, with the same
        text (`known=`)."""
        return self._memo, self._runs

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


def text_and_words(source: "str | TextWords") -> tuple[str, "str | TextWords"]:
    """A text, and what answers ``word in`` it: its remembered words where the caller has them (a file linted,
    whose trigger words were looked for already), else the text itself. For readers that test a few words before
    a regex over the text (`project.summarize`'s, `kind.file_kind`)."""
    return (source, source) if isinstance(source, str) else (source.text, source)


def holds(words: TextWords | WordsPlus, groups: Iterable[tuple[str, ...]]) -> bool:
    """One word of each group occurs (a detector's triggers, as `Detector.applies` reads them)."""
    for group in groups:
        for word in group:
            if word in words:
                break
        else:
            return False
    return True


def search_order(groups: tuple[tuple[str, ...], ...]) -> tuple[tuple[str, ...], ...]:
    """The same groups in the order that asks least: shorter words first within a group (an absent ``float16``
    answers ``bfloat16`` too), the groups with fewest words first (most likely to fail, ending the test)."""
    return tuple(sorted((tuple(sorted(g, key=len)) for g in groups), key=len))


def gates_for(vocabulary: Iterable[str], least: int = 3) -> dict[str, str]:
    """For each word, a piece of it (4 characters or more) that at least `least` words of `vocabulary` contain, the
    one with most characters over all of them: ``f16`` for ``bf16"``, ``fp16'``, ``bf16=``..."""
    words = set(vocabulary)
    pieces = {w: {w[i:j] for i in range(len(w)) for j in range(i + 4, len(w) + 1)} - {w} for w in words}
    cover: dict[str, int] = {}
    for found in pieces.values():
        for piece in found:
            cover[piece] = cover.get(piece, 0) + 1
    out = {}
    for w, found in pieces.items():
        # the longer a piece, the rarer in a text; the more words share it, the more one search answers
        best = max((p for p in found if cover[p] >= least), key=lambda p: (cover[p] * len(p), len(p)), default=None)
        if best is not None:
            out[w] = best
    return out


_NO_WORDS = Vocabulary(())
