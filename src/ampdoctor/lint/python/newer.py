"""Files that only a newer Python can parse: a SyntaxError that points at Python 3.12 syntax is a note that the
file was not checked, not an input error (`ErrorKind.NEWER_SYNTAX`)."""

from __future__ import annotations

import re
import sys

# The message of a file this interpreter cannot parse because it uses newer Python syntax (ErrorKind.NEWER_SYNTAX): a note, not an input
# error (the file is fine; linting it needs Python 3.12+).
NEWER_PYTHON = "uses syntax of Python 3.12+: "
_FSTRING_3_12 = ("f-string expression part cannot include a backslash", "f-string expression part cannot include '#'",
                 "f-string: unmatched", "f-string: expecting '}'")
_F_PREFIX = re.compile(r"(?i)(?:[rb]?f|f[rb]?)[\"']")
_TYPE_PARAMS = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+\w+\s*\[|^\s*type\s+\w+\s*(?:\[[^=]*\])?\s*=")


def newer_syntax(exc: SyntaxError, text: str) -> str | None:
    """What Python 3.12 syntax a SyntaxError of an older interpreter points at, if any: f-strings as PEP 701 allows
    them (quotes reused, line breaks, backslashes or comments inside the braces) or type parameters (PEP 695)."""
    if sys.version_info >= (3, 12) or not exc.lineno:
        return None
    lines = text.splitlines()
    line = lines[exc.lineno - 1] if exc.lineno <= len(lines) else ""
    msg = exc.msg or ""
    if msg.startswith(_FSTRING_3_12):
        return "an f-string (PEP 701)"
    if msg.startswith("unterminated string literal") and exc.offset and _F_PREFIX.match(line, exc.offset - 1) \
            and _opens_a_field(line[exc.offset - 1:]):
        return "an f-string spanning lines (PEP 701)"
    if _TYPE_PARAMS.match(line):
        return "type parameters (PEP 695)"
    return None


def _opens_a_field(rest: str) -> bool:
    """The f-string's line leaves a replacement field open: only then can 3.12 continue it on the next line (a bare
    unclosed quote such as ``f"`` is a syntax error in every version)."""
    rest = rest.replace("{{", "").replace("}}", "")
    return rest.count("{") > rest.count("}")
