"""Values from the input inside messages: quoted as Python writes them, and cut where long. A config value, a path or
a policy string may be any size (a 5,000-character string, a base64 blob, a list of NUL bytes); a message echoes the
start of it and says how long it was, never the whole."""

from __future__ import annotations

from typing import Any

LIMIT = 120  # the most characters of a value a message shows


def quoted(value: Any, limit: int = LIMIT) -> str:
    """`repr(value)` when it is short; else the start of it (at most `limit` characters written, escapes included)
    and the size of the whole."""
    if isinstance(value, str):
        if len(value) <= limit and len(repr(value)) <= 2 * limit:
            return repr(value)
        cut = value[:limit]
        while len(repr(cut)) > limit + 2:  # escapes (\x00, \U0001f600) write one character as up to ten
            cut = cut[: len(cut) * 2 // 3]
        return f"{cut!r}... ({len(value)} characters)"
    text = repr(value)
    if len(text) <= limit:
        return text
    size = f"{len(value)} items" if isinstance(value, (list, tuple, dict, set)) else f"{len(text)} characters written out"
    return f"{text[:limit]}... ({type(value).__name__}, {size})"
