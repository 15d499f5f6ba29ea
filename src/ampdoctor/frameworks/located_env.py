"""Shell env files (SimpleTuner's config.env): `[export] NAME=value` lines as a shell reads them, each name located."""

from __future__ import annotations

import re
import shlex
from typing import Mapping

from ampdoctor.core import Location
from ampdoctor.frameworks.document import Document, KeyPath
from ampdoctor.report import ReportError

_ASSIGN = re.compile(r"^(?P<indent>\s*)(?:export\s+)?(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>.*)$")
_VAR = re.compile(r"\$(?:\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?::?[-=][^}]*)?\}|(?P<plain>[A-Za-z_][A-Za-z0-9_]*))")


def looks_like_env(text: str) -> bool:
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    return bool(lines) and all(_ASSIGN.match(ln) for ln in lines[:5])


def load_env(text: str, file: str) -> tuple[list[Document], ReportError | None]:
    """A sourced shell file: `[export] NAME=value` lines with shell quoting, `$VAR` expansion of names
    defined earlier, values that continue over lines while a quote is open. Other shell lines are ignored."""
    data: dict[str, str] = {}
    locs: dict[KeyPath, Location] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        match = _ASSIGN.match(lines[i])
        if match is None:
            i += 1
            continue
        start = i
        raw = match["value"]
        while True:
            value = _shell_value(raw, data)
            if value is not None:
                break
            i += 1
            if i >= len(lines):
                column = len(match["indent"]) + len(match["name"]) + 2 + (len(lines[start]) - len(lines[start].lstrip()) - len(match["indent"]))
                return [], ReportError(file, f"unterminated quote in the value of {match['name']}", start + 1, column)
            raw += "\n" + lines[i]
        name = match["name"]
        data[name] = value
        locs[(name,)] = Location(file=file, line=start + 1, column=lines[start].index(name) + 1)
        i += 1
    return [Document(file, "env", data, locs, text)], None


def _shell_value(raw: str, defined: Mapping[str, str]) -> str | None:
    """The value a shell assigns, or None while a quote is still open."""
    text = raw.rstrip()
    if text.endswith("\\") and not text.endswith("\\\\"):
        return None
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        tokens = list(lexer)
    except ValueError:
        return None
    words: list[str] = []
    for token in tokens:
        if token and set(token) <= set(";&|"):
            break
        words.append(token)
    # A shell assigns only the first word; a quoted value is one word.
    value = words[0] if words else ""
    if "'" not in raw.split("#", 1)[0][:1]:
        value = _VAR.sub(lambda m: defined.get(m["braced"] or m["plain"], ""), value)
    return value
