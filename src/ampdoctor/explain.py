"""`explain`: error text (a message, a traceback or a whole training log) -> ranked catalog rules.

A rule is a candidate when one of its signatures matches; traceback/log context the rule names
(the `bmm` on attention probabilities, `scaler.step`, flash-attn's `rotary.py`, `backward`) decides
between rules that share a signature, as "expected scalar type BFloat16 but found Float" is shared.

A candidate the text supports only weakly is marked a guess: its message is one that other rules match as well
(or one the catalog itself weighs as generic) and nothing rule-specific comes with it. bench/explain measures on
real issue texts how often a wrong first answer still comes without that mark.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Sequence

from ampdoctor.core import Finding, Location, Rule, Severity, Signature, catalog, finding

# A signature alone earns at most this share of the score; the rest comes from matching context.
_SIGNATURE_SHARE = 0.55
# Rules that name no context get this fraction of the context share, so they are not out-ranked by
# rules whose context simply failed to match.
_NEUTRAL_CONTEXT = 0.3
MIN_SCORE = 0.2
# A signature below this weight is generic by the catalog's own account (a NaN loss, a shared dtype message).
SPECIFIC_WEIGHT = 0.8
# Context that makes a shared or generic message this rule's: at least this share of the rule's context weight.
SUPPORTING_CONTEXT = 0.25
# Below this share of the best score a candidate does not fit as well as the others: hidden unless asked for all.
WEAK_SHARE = 0.65

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<func>\S+))?')


@dataclass(frozen=True)
class Candidate:
    rule: Rule
    score: float
    reason: str
    matched: str
    location: Location | None
    # The text supports this rule only weakly (a generic message, nothing rule-specific around it): a guess.
    guess: bool = False
    context_matched: bool = True  # what usually comes with the error (the rule's context) is in the text too

    @property
    def confirm(self) -> str:
        return confirm_command(self.rule)

    def to_dict(self) -> dict[str, Any]:
        out = {
            "name": self.rule.name,
            "id": self.rule.id,
            "score": round(self.score, 3),
            "guess": self.guess,
            "reason": self.reason,
            "fix": self.rule.fix,
            "why": self.rule.why,
            "severity": self.rule.severity.value,
            "matched": self.matched,
            "confirm": self.confirm,
        }
        if self.location is not None:
            out["location"] = self.location.to_dict()
        return out


def confirm_command(rule: Rule) -> str:
    """The command that would confirm the diagnosis on the user's own project."""
    if rule.confirm:
        return rule.confirm
    if "runtime" in rule.detectors:
        return "ampdoctor run --policy bf16-mixed <your train script>"
    if "config" in rule.detectors or "code" in rule.detectors:
        return "ampdoctor lint <your project directory>"
    return "ampdoctor env"


def _search(sig: Signature, text: str) -> re.Match[str] | None:
    return re.search(sig.pattern, text, flags=re.IGNORECASE)


def _last_frame_before(text: str, position: int) -> Location | None:
    """The innermost traceback frame printed before the error line: where the failing call was made."""
    frames = [m for m in _FRAME.finditer(text, 0, position)]
    if not frames:
        return None
    m = frames[-1]
    return Location(file=m["file"], line=int(m["line"]), label=f"in {m['func']}" if m["func"] else None)


@dataclass(frozen=True)
class _Fit:
    """How one rule fits the text, before it is compared with the other rules' fits."""

    candidate: Candidate
    span: tuple[int, int]
    weight: float
    context: float  # the share of the rule's context weight found in the text (0 for a rule that names none)


def _score(rule: Rule, text: str) -> _Fit | None:
    best: tuple[Signature, re.Match[str]] | None = None
    for sig in rule.signatures:
        match = _search(sig, text)
        if match and (best is None or sig.weight > best[0].weight):
            best = (sig, match)
    if best is None:
        return None
    sig, match = best
    hits = [c for c in rule.context if _search(c, text)]
    found = sum(c.weight for c in hits) / sum(c.weight for c in rule.context) if rule.context else 0.0
    fraction = found if rule.context else _NEUTRAL_CONTEXT
    score = sig.weight * (_SIGNATURE_SHARE + (1 - _SIGNATURE_SHARE) * fraction)
    reason = f"error text matches {match.group(0)!r}"
    if hits:
        shown = ", ".join(repr(_search(c, text).group(0)) for c in hits)  # type: ignore[union-attr]
        reason += f"; traceback/log context matches {shown}"
    elif rule.context:
        reason += f"; but none of what usually comes with it ({_in_words(rule.context)}) is in the text"
    cand = Candidate(rule, score, reason, match.group(0), _last_frame_before(text, match.start()),
                     context_matched=bool(hits) or not rule.context)
    return _Fit(cand, match.span(), sig.weight, found)


def _is_guess(fit: _Fit, fits: Sequence[_Fit]) -> bool:
    """A fit is a guess unless the rule's own context is in the text, or its message is specific to it: weighed
    as specific, and not matched on the same or a wider stretch of text by another rule's signature. Context
    decides a shared message only when it points at this rule more than at the others: a rival on the same message
    with as large a share of its own context in the text, and shown beside this one, leaves the choice open."""
    start, end = fit.span
    shared = [o for o in fits if o is not fit and o.span[0] <= start and o.span[1] >= end]
    if fit.context >= SUPPORTING_CONTEXT:
        return any(o.context >= fit.context and o.candidate.score >= max(MIN_SCORE, WEAK_SHARE * fit.candidate.score)
                   for o in shared)
    if fit.weight < SPECIFIC_WEIGHT:
        return True
    return bool(shared)


def _in_words(context: Sequence[Signature], most: int = 8) -> str:
    """A rule's context patterns as the words they look for (`\\bbmm\\b|baddbmm` -> bmm, baddbmm), not as regexes."""
    words: list[str] = []
    for c in context:
        plain = re.sub(r"\\(.)", r"\1", re.sub(r"\\b|\(\?:|\(\?i\)|[()^$?*+]", "", c.pattern))
        words += [w for w in (part.strip() for part in plain.split("|")) if w and w not in words]
    return ", ".join(words[:most]) + (", ..." if len(words) > most else "")


def explain(text: str, *, limit: int | None = 5, weak: bool = False, rules: Sequence[Rule] | None = None) -> list[Candidate]:
    """Candidate rules for an error text, best first; empty when nothing in the catalog matches. Candidates scoring
    below `WEAK_SHARE` of the best fit worse than it and are left out unless `weak`. `rules`: the rules to consider
    (default: the catalog)."""
    pool = catalog() if rules is None else rules
    fits = [f for rule in pool if "explain" in rule.detectors if (f := _score(rule, text)) is not None]
    scored = [_as_guess(f.candidate) if _is_guess(f, fits) else f.candidate for f in fits]
    scored = [c for c in scored if c.score >= MIN_SCORE]
    scored.sort(key=lambda c: (-c.score, c.rule.id))
    if scored and not weak:
        scored = [c for c in scored if c.score >= WEAK_SHARE * scored[0].score]
    return scored[:limit]


def _as_guess(cand: Candidate) -> Candidate:
    return replace(cand, guess=True, reason=f"a guess: {cand.reason}")


def explain_findings(text: str, *, limit: int = 3, location: Location | None = None) -> list[Finding]:
    """The top candidates as findings: the best one an error, the others info, for detectors
    (such as the runtime audit) that caught an exception and want it diagnosed."""
    out = []
    for rank, cand in enumerate(explain(text, limit=limit)):
        out.append(
            finding(
                cand.rule.name,
                f"{cand.reason} (score {cand.score:.2f})",
                location or cand.location,
                severity=Severity.ERROR if rank == 0 else Severity.INFO,
                details={"context_matched": cand.context_matched},
            )
        )
    return out
