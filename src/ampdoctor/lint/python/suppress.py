"""Inline suppression: ``# ampdoctor: ignore`` (every rule) or ``# ampdoctor: ignore[rule-name, AMP004]`` on the
line a finding points at, in the manner of ruff's ``# noqa``."""

from __future__ import annotations

import io
import re
import tokenize

from ampdoctor.core import Finding, get_rule

MARKER = "ampdoctor:"
_DIRECTIVE = re.compile(r"ampdoctor:\s*ignore\b(?:\[(?P<rules>[^\]]*)\])?", re.IGNORECASE)

# line -> None (all rules) or the ids of the named rules
Suppressions = dict[int, "frozenset[str] | None"]


def parse_suppressions(text: str) -> Suppressions:
    """Directives found in comments only (not in strings); unknown rule names suppress nothing."""
    out: Suppressions = {}
    if MARKER not in text:
        return out
    try:
        comments = [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(text).readline) if tok.type == tokenize.COMMENT]
    except (tokenize.TokenError, SyntaxError, ValueError):
        return out
    for line, comment in comments:
        match = _DIRECTIVE.search(comment)
        if match is None:
            continue
        if match["rules"] is None:
            out[line] = None
            continue
        ids = set()
        for key in match["rules"].split(","):
            try:
                ids.add(get_rule(key.strip()).id)
            except KeyError:
                continue
        if out.get(line, frozenset()) is not None:
            out[line] = frozenset(ids) | (out.get(line) or frozenset())
    return out


def is_suppressed(finding: Finding, suppressions: Suppressions) -> bool:
    line = finding.location.line
    if line not in suppressions:
        return False
    rules = suppressions[line]
    return rules is None or finding.rule_id in rules
