"""`explain`: error text (a message, a traceback or a whole training log) -> ranked catalog rules.

A rule is a candidate when one of its signatures matches; traceback/log context the rule names
(the `bmm` on attention probabilities, `scaler.step`, flash-attn's `rotary.py`, `backward`) decides
between rules that share a signature, as "expected scalar type BFloat16 but found Float" is shared.

A candidate the text supports only weakly is marked a guess: its message is one that other rules match as well
(or one the catalog itself weighs as generic) and nothing rule-specific comes with it, or the text raised an
exception and the message is not in it, or the failure is only told in words (a `told` signature, or any match in a
text that prints nothing: no exception, no frame, no mark of program output on the line), or the dtype check says the
dtype it got is an integer one (a Long mask, Int indices: no precision setting makes those), or the text prints a
second failure that another rule's signature reads, or the text shows where it failed (a frame, the code that ran)
and none of the context the rule names (a rule that names none has nothing there to confirm it), or another rule's
reading of the text scores nearly as high (`RIVAL_SHARE`). bench/explain measures on real issue texts how often a wrong first answer still comes without that
mark (explain_bench.py; replay.py for texts the code had not seen).

Where no signature matches, or the best match is only a guess, the rules whose own catalog text (title, why, fix,
the words of their signatures) is closest to the text's words are offered too, always as guesses (`basis`
"wording"): a rule the user can check, never a diagnosis.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
import sys
from collections import Counter
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
# Context that makes a shared or generic message this rule's: at least this share of the rule's context weight. Half,
# so that one broad cue among several (a deepspeed frame, which most texts of a DeepSpeed run show; "bf16" beside a
# kernel message that any bf16 run can print) does not decide it.
SUPPORTING_CONTEXT = 0.5
# A message the catalog weighs below this (a NaN loss, an overflow told in words) has too many causes to be a
# diagnosis whatever comes with it: a softmax or an fp16 flag beside "NaN loss" ranks the rules, never decides.
TELLING_WEIGHT = 0.4
# Below this share of the best score a candidate does not fit as well as the others: hidden unless asked for all.
WEAK_SHARE = 0.65
# A first answer with another rule's signature match scoring at least this share of its score is a guess: the text fits
# two rules nearly as well, whatever decided the order. Replaying the corpus's history on tune texts (each batch of new
# texts explained by the code of the day before it), confident answers with such a rival were wrong 3 times in 6;
# at 0.6 it was 3 in 17, the base rate of all confident answers 1 in 15.
RIVAL_SHARE = 0.7

# The wording fallback (`_closest_by_wording`): BM25 over each rule's own catalog text. K1/B are BM25's usual
# saturation and length normalisation (cross-validated on folds of the tune split, no setting did clearly better than
# these textbook values, so they stay); a signature's or context's words count SIGNATURE_WORDS times, since they are
# the words an error prints, where why/fix are prose. A rule is offered only with at least CLOSEST_MIN_WORDS words
# in common with the text.
# The idf of a word and the length a rule's text is normalised by come from the rules' prose alone (name, summary, why,
# fix, example), never from their signatures: a signature added to one rule, or taken from it, then moves that rule's
# wording score and no other's, so the order of the other rules for any text stays as it was. (Computed over all the
# words, each new signature shifted every rule's idf and length norm a little, and near-tied rules it has nothing to do
# with swapped places.) A word that only signatures use counts as if SIGNATURE_ONLY_DF rules' prose had it: 2, chosen
# on bench/explain's tune texts with the index perturbed (each catalog pattern left out in turn), where 1, 2, 3 and 5
# answered the same and 2 moved the fewest first answers.
BM25_K1 = 1.2
BM25_B = 0.75
SIGNATURE_WORDS = 3
SIGNATURE_ONLY_DF = 2
CLOSEST_MIN_WORDS = 3
CLOSEST_LIMIT = 3
CLOSEST_REASON = "no signature of this rule matched; closest by wording"

if sys.version_info >= (3, 11):
    from re import _constants as _RE
    from re import _parser as _re_parser
else:  # pragma: no cover (Python 3.10)
    import sre_constants as _RE
    import sre_parse as _re_parser

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<func>\S+))?')
# The error a text prints: a Python exception named with its message ("RuntimeError: ...", "[rank0]:
# torch._dynamo.exc.TorchRuntimeError: ...", "`ValueError : ...`" quoted in prose, DeepSpeed's bare "Exception: ..."),
# with the lines of the message that follow, up to the next frame, traceback header or blank line. Exceptions only: a
# warning is printed beside the failure, not as it.
_ERROR = re.compile(r"^.*?(?<![\w.])(?:[A-Za-z_][\w.]*\.)?(?:[A-Z]\w*)?(?:Error|Exception)[ \t]*:[ \t]*\S.*"
                    r"(?:\n(?![ \t]*(?:File \"|Traceback|The above exception|During handling|$)).*)*", re.MULTILINE)


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
    # "signature": one of the rule's signatures matched; "wording": none did, the rule's catalog text is only the
    # closest to the text's words (always a guess, scored below MIN_SCORE).
    basis: str = "signature"

    @property
    def confirm(self) -> str:
        return confirm_command(self.rule)

    def to_dict(self) -> dict[str, Any]:
        out = {
            "name": self.rule.name,
            "id": self.rule.id,
            "score": round(self.score, 3),
            "guess": self.guess,
            "basis": self.basis,
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


# How every signature, context and doubt pattern is matched: case-insensitively, with `\b`, `\w`, `\d` and `\s` in
# their ASCII sense. Messages, identifiers and dtypes are ASCII; a report in Chinese or Japanese writes them against its
# own words without a space ("当使用Fp16的时候，前向出现Nan"), and with Unicode word characters no `\b` separates
# "Fp16" from "的" there, so a pattern that reads "fp16 ... nan" in an English report missed the same words in one.
_FLAGS = re.IGNORECASE | re.ASCII


# Words of a report in Chinese or Japanese that the catalog's signatures read in English: a refusal ("不支持bf16": does
# not support bf16), a default ("默认是torch.float16": defaults to), and the half precision, mixed precision and
# overflow a report names. `explain` reads each as the English it stands for, with spaces around it so that `\b`
# separates it from the characters beside it; nothing else of the text changes (the other characters stay as written,
# and the ASCII words a report writes against them are read as `_FLAGS` says).
_IN_ENGLISH = tuple((re.compile(words), english) for words, english in (
    ("不支持|不支援|不受支持|サポートされていません|サポートしていません", " does not support "),
    ("默认是|默认为|默认使用|デフォルトは", " defaults to "),
    ("半精度", " half precision "),
    ("混合精度", " mixed precision "),
    ("溢出|オーバーフロー", " overflow "),
))


def _in_english(text: str) -> str:
    """The text with the words of `_IN_ENGLISH` read in English (a text in English is returned as it is)."""
    if text.isascii():
        return text
    for words, english in _IN_ENGLISH:
        text = words.sub(english, text)
    return text


def _search(sig: Signature, text: str) -> re.Match[str] | None:
    # A regex scan of a multi-MB log costs tens of ms per pattern, a substring test a fraction of that: a pattern
    # none of whose required strings is in the text cannot match it.
    needed = _required_text(sig.pattern)
    if needed and not any(n in _lowered(text) for n in needed):
        return None
    return re.search(sig.pattern, text, flags=_FLAGS)


@functools.lru_cache(maxsize=2)  # the text of one explain call, asked once per pattern
def _lowered(text: str) -> str:
    # Under `_FLAGS` a match is ASCII and only ASCII letters fold, so the lower-cased text holds the match lowered.
    return text.lower()


@functools.lru_cache(maxsize=None)
def _required_text(pattern: str) -> tuple[str, ...]:
    """Strings, lower-cased, one of which every match of `pattern` contains (empty when none can be told, or when one
    is shorter than 3 characters or not ASCII): a run of literal characters, or one per branch of an alternation."""
    try:
        needed = _needs(_re_parser.parse(pattern, _FLAGS))
    except (re.error, RecursionError, OverflowError):
        return ()
    if not needed or any(len(n) < 3 or not n.isascii() for n in needed):
        return ()
    return tuple(n.lower() for n in needed)


def _needs(parsed: Any) -> tuple[str, ...]:
    """For a parsed regex: the strings one of which every match contains, the best of those its parts give (a
    literal run; a group, a repeat at least once, or an alternation whose every branch gives some)."""
    options: list[tuple[str, ...]] = []
    run: list[str] = []
    for op, arg in [*parsed, (None, None)]:
        if op is _RE.LITERAL:
            run.append(chr(arg))
            continue
        if run:
            options.append(("".join(run),))
            run = []
        inner: tuple[str, ...] = ()
        if op is _RE.SUBPATTERN:
            inner = _needs(arg[3])
        elif op in (_RE.MAX_REPEAT, _RE.MIN_REPEAT) and arg[0] >= 1:
            inner = _needs(arg[2])
        elif op is _RE.BRANCH:
            branches = [_needs(b) for b in arg[1]]
            inner = tuple(n for b in branches for n in b) if all(branches) else ()
        if inner:
            options.append(inner)
    return max(options, key=lambda o: min(len(n) for n in o), default=())


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
    # The text prints its error and the rule's message is not in it (only in a log line, a frame, the user's words).
    beside_error: bool = False
    # The text is one line, the one the message is on: no frame, no log line, no words of the user's around it.
    alone: bool = False
    # The signature reads a failure told in words (`Signature.told`), not a printed message: it ranks, never decides.
    # So does any match in a text that is a report in words (`_told_in_text`): nothing in it was printed by software.
    told: bool = False
    # The message's line says the dtype it got is an integer type (a Long mask, Int indices): a dtype mismatch, but
    # of integers, which no precision setting makes; the precision rule its wording matched can only be a guess.
    integer: bool = False
    # The printed failures (`_errors`, by index) that the signature's message is in, wherever in the text it matches.
    failures: frozenset[int] = frozenset()
    # The text shows what speaks against the message's account of itself (`Signature.doubt`): it ranks, never decides.
    doubted: bool = False
    # The text shows where the failure happened: a traceback frame, or a line of the code that ran (`_shows_where`).
    shows_where: bool = False
    # The share of the rule's context weight found outside the stretch the signature matched: what confirms the
    # message independently of it. Context inside the match (a signature that reads the SDPA call beside a matmul
    # message, a message that names the `unscale_` kernel) ranks the rule, but is the message's own evidence again.
    beside: float = 0.0
    # The text prints no exception and shows no frame or code: the message is quoted in a report (its words, its
    # command line), so what the report says around it is the reporter's account, not the failure's own trace.
    quoted: bool = False


def _score(rule: Rule, text: str) -> _Fit | None:
    best: tuple[Signature, re.Match[str]] | None = None
    for sig in rule.signatures:
        match = _search(sig, text)
        if match and sig.unless and _search(Signature(sig.unless), text):
            continue
        if match and (best is None or sig.weight > best[0].weight):
            best = (sig, match)
    if best is None:
        return None
    sig, match = best
    doubt = _doubted(sig, text, match)
    hits = [c for c in rule.context if _search(c, text)]
    found = _context_share(rule, hits) if rule.context else 0.0
    fraction = found if rule.context else _NEUTRAL_CONTEXT
    score = sig.weight * (_SIGNATURE_SHARE + (1 - _SIGNATURE_SHARE) * fraction)
    reason = _reason(rule, text, match, hits, doubt)
    cand = Candidate(rule, score, reason, match.group(0), _last_frame_before(text, match.start()),
                     context_matched=bool(hits) or not rule.context)
    return _Fit(cand, match.span(), sig.weight, found, not _in_error(sig, text, match), "\n" not in text.strip(),
                sig.told or _told_in_text(text, match), _got_integer(text, match), _failures_read(sig, text),
                doubt is not None, _shows_where(text, match.span()), _share_beside(rule, hits, text, match.span()),
                not _errors(text) and not _shows_where(text))


def _share_beside(rule: Rule, hits: Sequence[Signature], text: str, span: tuple[int, int]) -> float:
    """The share of the rule's context weight (of the `hits` found anywhere) found somewhere outside `span`."""
    if not hits:
        return 0.0
    beside = [c for c in hits if any(m.start() < span[0] or m.end() > span[1]
                                     for m in re.finditer(c.pattern, text, flags=_FLAGS))]
    return _context_share(rule, beside)


def _context_share(rule: Rule, found: Sequence[Signature]) -> float:
    """The share of the weight of the rule's context (its `context` patterns) that `found` holds."""
    return sum(c.weight for c in found) / sum(c.weight for c in rule.context)


def _reason(rule: Rule, text: str, match: re.Match[str], hits: Sequence[Signature], doubt: re.Match[str] | None) -> str:
    """Why the rule fits: the message matched, the context found or missed, and what the text shows against it."""
    reason = f"error text matches {match.group(0)!r}"
    if hits:
        shown = ", ".join(repr(_search(c, text).group(0)) for c in hits)  # type: ignore[union-attr]
        reason += f"; the text also shows what usually comes with it: {shown}"  # maybe inside the message itself
    elif rule.context:
        reason += f"; but none of what usually comes with it ({_in_words(rule.context)}) is in the text"
    if doubt:
        reason += f"; yet the text also shows {doubt.group(0)!r}, which speaks against it"
    return reason


def _doubted(sig: Signature, text: str, match: re.Match[str]) -> re.Match[str] | None:
    """What the text shows against the signature's reading (`Signature.doubt`), beside the message: the message's own
    words (a refusal naming the A100 it requires) are blanked before the search."""
    if not sig.doubt:
        return None
    beside = text[:match.start()] + " " * (match.end() - match.start()) + text[match.end():]
    return re.search(sig.doubt, beside, flags=_FLAGS)


# What marks a line as printed by software rather than written by a person: an error or warning word, a log prefix
# (`[rank0]`, `>>`, `$`, `#`), a file and line (`train.py`, `:958:`), a quote or backtick, a C++ scope (`c10::`), a
# dotted, snake_case or called identifier (`torch.float16`, `batch_number`, `autocast(`).
_OUTPUT_MARK = re.compile(r"error|warning|exception|warn\b|assert|fail|traceback|^\s*[\[<>$#]|\w\.py\b|:\d+:|[`\"']|::"
                          r"|\w\.\w|\w_\w|\w\(", re.IGNORECASE)


# The full stops of Chinese and Japanese: a report in those languages writes several sentences on one line, so one of
# them can hold the code or the flag it speaks of while the next describes the failure in words.
_SENTENCE_END = "\u3002\uff01\uff1f"


def _told_in_text(text: str, match: re.Match[str]) -> bool:
    """Is the text a report in words where the message matched: more than one line (a line alone is a message as
    pasted), no exception printed, no traceback frame, and the line the match is on shows no mark of program output
    (`_OUTPUT_MARK`)? Then what the signature read is how a person described the failure ("the implementation
    accumulates grads in BF16"), not what software printed, and it ranks like a `told` signature, never decides
    (replaying the corpus's history, such matches of signatures not marked `told` were confidently wrong 3 times in
    5). In a report in Chinese or Japanese the sentence the match is in (`_SENTENCE_END`) stands for the line: one
    sentence may name the code it ran (`autocast()`) and the next tell the failure in words (replaying the history,
    that made the one confident wrong answer of such a report a guess, and changed no answer on the tune texts)."""
    if "\n" not in text.strip() or _errors(text) or _FRAME.search(text):
        return False
    start = max(text.rfind(c, 0, match.start()) + 1 for c in "\n" + _SENTENCE_END)
    end = min((i for c in "\n" + _SENTENCE_END if (i := text.find(c, match.end())) >= 0), default=len(text))
    return not _OUTPUT_MARK.search(text, start, end)


# A line of the code that ran, as a report pastes it: an assignment from a call (`model = AutoModel.from_pretrained(`,
# `>>> x = net(y)`, `logits[i] = f(`) or a `with` block entered on a call (`with torch.autocast("cuda"):`).
_CODE_LINE = re.compile(r"^[ \t]*(?:>>>[ \t]*)?(?:[A-Za-z_][\w.]*(?:\[[^\]\n]*\])?[ \t]*=[ \t]*[A-Za-z_][\w.]*\("
                        r"|with[ \t]+[\w.]+\(.*\)(?:[ \t]+as[ \t]+\w+)?[ \t]*:)", re.MULTILINE)
# A call of a dotted name alone on its line, as a report pastes what it ran (`trainer.fit(model)`,
# `torch.cuda.is_bf16_supported()` above what it printed): code that ran too, unless it is the line a signature reads
# (a message that is itself a call, such as a clipping line told as the fix). Replaying the corpus's history with it
# counted, one confident wrong answer (a rule naming no context, a hardware refusal beside the check that says the
# hardware has bf16) became a guess and no confident right one did.
_CALL_LINE = re.compile(r"^[ \t]*(?:>>>[ \t]*)?[A-Za-z_]\w*(?:\.\w+)+\([^\n]*\)[ \t]*$", re.MULTILINE)


def _shows_where(text: str, span: tuple[int, int] = (0, 0)) -> bool:
    """Does the text show where its failure happened: a traceback frame, or a line of the code that ran (a call alone
    on its line only where the stretch `span`, what a signature read, does not overlap it: that is the message)?"""
    return _shows_code(text) or any(s >= span[1] or e <= span[0] for s, e in _call_lines(text))


@functools.lru_cache(maxsize=2)  # the text of one explain call, asked once per matching rule
def _shows_code(text: str) -> bool:
    return bool(_FRAME.search(text) or _CODE_LINE.search(text))


@functools.lru_cache(maxsize=2)
def _call_lines(text: str) -> tuple[tuple[int, int], ...]:
    return tuple(m.span() for m in _CALL_LINE.finditer(text))


def _failures_read(sig: Signature, text: str) -> frozenset[int]:
    """The printed failures (indices into `_errors`) that some match of the signature's pattern overlaps."""
    errors = _errors(text)
    if not errors:
        return frozenset()
    spans = [m.span() for m in re.finditer(sig.pattern, text, flags=_FLAGS)]
    return frozenset(i for i, (start, end) in enumerate(errors) if any(s < end and e > start for s, e in spans))


# What a dtype check says it got or expected, where that is an integer dtype: "got attn_mask.dtype: long int", "found Long",
# "got Long for the destination", "but got: c10::Int". A `bool` mask is not counted (masks are meant to be bool).
_GOT_INTEGER = re.compile(r"\b(?:found|got|expected scalar type)\b:?[ \t]*(?:[\w.]+\.dtype:?[ \t]*)?(?:struct[ \t]+)?(?:c10::|at::|torch\.)?"
                          r"(?:long|int|short|byte|char|u?int(?:8|16|32|64))\b", re.IGNORECASE)


def _got_integer(text: str, match: re.Match[str]) -> bool:
    """Does the line the message ends on (from where the message begins) say the dtype it got is an integer one?"""
    end = text.find("\n", match.end())
    return bool(_GOT_INTEGER.search(text, match.start(), len(text) if end < 0 else end))


# A line that opens an exception of its own: where one printed failure ends and the next begins, even without a blank
# line or a traceback header between them ("1. `RuntimeError: ...`" and "2. `RuntimeError: ...`" listed in an issue).
_ERROR_HEAD = re.compile(r"^.*?(?<![\w.])(?:[A-Za-z_][\w.]*\.)?(?:[A-Z]\w*)?(?:Error|Exception)[ \t]*:[ \t]*\S", re.MULTILINE)


@functools.lru_cache(maxsize=2)  # the text of one explain call, asked once per matching rule
def _errors(text: str) -> tuple[tuple[int, int], ...]:
    """The failures the text prints (`_ERROR`), one span each: an error whose message lines include a line opening an
    exception of its own is two failures."""
    out: list[tuple[int, int]] = []
    for m in _ERROR.finditer(text):
        starts = [m.start()] + [h.start() for h in _ERROR_HEAD.finditer(text, m.start(), m.end()) if h.start() > m.start()]
        out += zip(starts, starts[1:] + [m.end()])
    return tuple(out)


def _in_error(sig: Signature, text: str, first: re.Match[str]) -> bool:
    """Is the signature's message (one of its matches; a match may begin in the frames above) part of the error the
    text prints? True where the text prints no exception: then nothing tells the error from the rest."""
    errors = _errors(text)
    if not errors:
        return True
    matches = itertools.chain((first,), re.compile(sig.pattern, _FLAGS).finditer(text, first.end()))
    return any(m.start() < end and m.end() > start for m in matches for start, end in errors)


def _is_guess(fit: _Fit, fits: Sequence[_Fit]) -> bool:
    """A fit is a guess unless the rule's own context is in the text, or its message is specific to it: weighed
    as specific, and not matched on the same or a wider stretch of text by another rule's signature. Context
    decides a shared message only when it points at this rule more than at the others: a rival on the same message
    with as large a share of its own context in the text, and shown beside this one, leaves the choice open, and so
    does a rival on the same message that still scores higher (the context lifted this rule, but not above it). A
    message weighed below TELLING_WEIGHT is always a guess, and so is a message the text prints beside its error
    (a log line, a warning, a frame) while the exception it raised says something else: that exception is the
    failure, and what the line beside it has to do with it the text does not say. A failure told in words (a `told`
    signature) is always a guess too: how a report describes a cause is far looser than what software prints
    (replaying the corpus's history, each batch of new tune texts explained by the code of the day before it, such
    matches were confidently wrong on 4 of about 14 texts, against 1 in 15 for all confident answers). So is a dtype
    message whose line says what it got is an integer dtype (`integer`): a Long mask or Int indices, not precision.
    And so is a message when the text prints another failure too, which another rule's signature reads and this
    rule's does not (`_another_failure`). Checked on bench/explain's tune texts with each text's own rule taken out of
    the catalog: nothing confident among the first three. And so is a message beside which the text shows what speaks
    against it (`doubted`: a hardware refusal beside the runtime reporting the support it says is missing), and a
    specific message in a text that shows where it failed and holds none of its rule's context, or whose rule names
    none (`_context_missing`). And so is a message other rules read too, weighed below SPECIFIC_WEIGHT, in a text that
    only quotes it (`quoted`: no exception printed, no frame, no code): its context there is in the reporter's words
    and command line, which point at a rule but do not decide among the rules that read one generic message
    (replaying the corpus's history, the one such confident answer was wrong; of the tune texts' confident answers it
    marks two, both right, which stay first as guesses)."""
    if _never_decides(fit, fits):
        return True
    start, end = fit.span
    shared = [o for o in fits if o is not fit and o.span[0] <= start and o.span[1] >= end]
    read_too = any(o is not fit and o.span[0] < end and o.span[1] > start for o in fits)
    if fit.beside >= SUPPORTING_CONTEXT:
        if fit.quoted and fit.weight < SPECIFIC_WEIGHT and read_too:
            return True
        return any(o.candidate.score > fit.candidate.score or
                   (o.context >= fit.context and o.candidate.score >= max(MIN_SCORE, WEAK_SHARE * fit.candidate.score))
                   for o in shared)
    if fit.weight < SPECIFIC_WEIGHT or _context_missing(fit):
        return True
    # A message alone on its line, which other rules read a part of: its specific wording names the mechanism, but
    # which rule of the family it shares is the cause is told by what comes with a message, and nothing does.
    return bool(shared) or (fit.alone and read_too)


def _context_missing(fit: _Fit) -> bool:
    """The text shows where its failure happened (`shows_where`: a frame, a line of the code that ran) and none of the
    rule's context (the frames, calls and code that come with its failure) is in it: the text had the place to show
    what singles the rule out and does not. Its message alone, however specific, then ranks the rule and does not
    decide it. On tune texts explained by the code of the day before them (bench/explain/replay.py --calibration), the
    confident answers this marks were wrong 2 times in 12, the confident answers left 7 times in 248.
    A rule that names no context is concerned too: nothing around its message can confirm it, and around a message
    that reports the state of the machine (bf16 refused on a device, an autocast device type refused, a value that
    overflows half) the text shows a device, a backend or a load step the message did not account for (Apple MPS, a
    ROCm card, a Gaudi HPU, a bad download). Replaying the corpus's history with this calibration, the confident
    answers of such rules in texts that show where they failed were wrong 4 times in 23, the confident answers left 3
    times in 251; in texts that show no frame or code, the answers this would mark were wrong 1 time in 37, the base
    rate, so those stay confident (a message pasted alone, or with the words of its log)."""
    return fit.context == 0 and fit.shows_where


def _unconfirmed(fit: _Fit) -> str:
    """What the reason of a guess adds for a rule that names no context, in a text that shows where it failed: the
    place is shown, and nothing there can confirm the message (a rule that names context says what was missing)."""
    if fit.candidate.rule.context or not _context_missing(fit):
        return ""
    return "; the text shows where it failed, and this rule names nothing there that would confirm it"


def _never_decides(fit: _Fit, fits: Sequence[_Fit]) -> bool:
    """The reasons a fit is a guess whatever context comes with it (`_is_guess`): a message weighed below
    TELLING_WEIGHT, one printed beside the error, told in words, about integer dtypes, doubted by the text, or one of
    two printed failures."""
    return (fit.weight < TELLING_WEIGHT or fit.beside_error or fit.told or fit.integer or fit.doubted
            or _another_failure(fit, fits))


def _another_failure(fit: _Fit, fits: Sequence[_Fit]) -> bool:
    """Does the text print two failures, this rule's message in one and another rule's (a message weighed at least
    TELLING_WEIGHT, not told) only in another? Which of them the user asks about the text does not say. (Two
    readings that are each confident already make both guesses, `_one_confident`; this one holds when the other reading
    is only a guess, such as a shared dtype message without its context.) Replaying the corpus's history: one
    confident wrong answer of 215 had such a second failure, no confident right one did."""
    return bool(fit.failures) and any(
        o is not fit and o.failures and o.failures.isdisjoint(fit.failures) and not o.told and
        o.weight >= TELLING_WEIGHT and o.candidate.score >= MIN_SCORE for o in fits)


# A lookahead or lookbehind without groups inside it: `(?<![a-z])`, `(?!ed_?lm\\b)`, `(?<!for ')`.
_LOOKAROUND = re.compile(r"\(\?<?[=!](?:\\.|[^()\\])*\)")


def _in_words(context: Sequence[Signature], most: int = 8) -> str:
    """A rule's context patterns as the words they look for (`\\bbmm\\b|baddbmm` -> bmm, baddbmm), not as regexes: a
    lookaround (`(?<![a-z])rope`, `mask(?!ed_?lm)`) says where the word may stand, and is left out."""
    words: list[str] = []
    for c in context:
        bare = _LOOKAROUND.sub("", c.pattern)
        plain = re.sub(r"\\(.)", r"\1", re.sub(r"\\b|\(\?:|\(\?i\)|[()^$?*+]", "", bare))
        words += [w for w in (part.strip() for part in plain.split("|")) if w and w not in words]
    return ", ".join(words[:most]) + (", ..." if len(words) > most else "")


def explain(text: str, *, limit: int | None = 5, weak: bool = False, rules: Sequence[Rule] | None = None,
            closest: bool = True) -> list[Candidate]:
    """Candidate rules for an error text, best first. Candidates scoring below `WEAK_SHARE` of the best fit worse
    than it and are left out unless `weak`. Where no signature matches, and `closest`, up to `CLOSEST_LIMIT` rules
    whose catalog text is closest to the text's wording, each a guess (`basis` "wording"); empty when none is close
    either. `rules`: the rules to consider (default: the catalog). A report in Chinese or Japanese is read with its
    refusals, defaults and precision words in English (`_in_english`)."""
    pool = tuple(catalog() if rules is None else rules)
    text = _in_english(text)
    scored = list(_ranked(text, pool))
    if scored and not weak:
        scored = [c for c in scored if c.score >= WEAK_SHARE * scored[0].score]
    scored = _rivalled(_one_confident(scored))
    if closest and (not scored or scored[0].guess):
        scored = _with_closest(scored, text, pool)
    return scored[:limit]


@functools.lru_cache(maxsize=2)
def _ranked(text: str, pool: tuple[Rule, ...]) -> tuple[Candidate, ...]:
    """The rules whose signatures match, scored and marked as guesses where the text supports them weakly, best
    first. Cached for the last texts: the CLI asks twice of one text (what to show, how many are left out), and on a
    whole training log the signature search is most of the time."""
    fits = [f for rule in pool if "explain" in rule.detectors if (f := _score(rule, text)) is not None]
    scored = [_as_guess(f.candidate, _unconfirmed(f)) if _is_guess(f, fits) else f.candidate for f in fits]
    scored = [_below_backed_rival(c, f, fits) for c, f in zip(scored, fits)]
    scored = [_below_printed_failure(c, f, fits) for c, f in zip(scored, fits)]
    scored = [c for c in scored if c.score >= MIN_SCORE]
    scored.sort(key=lambda c: (-c.score, c.rule.id))
    return tuple(scored)


def _below_printed_failure(cand: Candidate, fit: _Fit, fits: Sequence[_Fit]) -> Candidate:
    """A failure told in words (`told`) ranks just below a specific message (weighed at least SPECIFIC_WEIGHT) that
    the text prints as its error: what software printed says what failed, a reporter's account of a cause is a
    theory about it. The order only, as `_below_backed_rival`; a told match never decides anyway. Without this, a
    told signature weighed high could score above the printed message and push it out of the answers altogether
    (below `WEAK_SHARE` of the first)."""
    if not fit.told:
        return cand
    printed = [o for o in fits if o is not fit and not o.told and not o.beside_error and o.weight >= SPECIFIC_WEIGHT
               and o.candidate.score < cand.score]
    if not printed:
        return cand
    best = max(printed, key=lambda o: o.candidate.score)
    return replace(cand, score=max(MIN_SCORE, best.candidate.score - 1e-3),
                   reason=f"{cand.reason}; ranked below {best.candidate.rule.id}, whose message the text prints")


def _below_backed_rival(cand: Candidate, fit: _Fit, fits: Sequence[_Fit]) -> Candidate:
    """A rule none of whose context is in the text ranks just below another rule that reads the same message (an
    overlapping match) with some of its own context in view: the one the text backs comes first, whatever the two
    signatures weigh. A rule that names no context is such a rule too: nothing in the text backs it, and the neutral
    share it scores with (`_NEUTRAL_CONTEXT`) stands for context that might have been shown, not for context that was.
    The order only; whether either is a guess was decided before."""
    if fit.context > 0:
        return cand
    start, end = fit.span
    backed = [o for o in fits if o is not fit and o.context > 0 and o.candidate.score > MIN_SCORE
              and o.span[0] < end and o.span[1] > start and o.candidate.score < cand.score]
    if not backed:
        return cand
    best = max(backed, key=lambda o: o.candidate.score)
    return replace(cand, score=max(MIN_SCORE, best.candidate.score - 1e-3),
                   reason=f"{cand.reason}; ranked below {best.candidate.rule.id}, whose context is in the text")


def _with_closest(scored: list[Candidate], text: str, pool: tuple[Rule, ...]) -> list[Candidate]:
    """Guesses by signature, with the rules closest in wording among the first `CLOSEST_LIMIT`: the best of them
    takes at least the last of those places."""
    rest = text  # the words beside the messages the signatures already read: the wording's own evidence
    for c in scored:
        rest = rest.replace(c.matched, " ")
    have = {c.rule.id for c in scored}
    wording = [c for c in _closest_by_wording(rest, pool) if c.rule.id not in have]
    keep = min(len(scored), CLOSEST_LIMIT - 1) if wording else len(scored)
    return scored[:keep] + wording[:max(0, CLOSEST_LIMIT - keep)] + scored[keep:]


# English function words, and the words every traceback prints whatever went wrong (paths, frames, "Error", C++
# type names).
_STOP = frozenset("""the and for with that this are was were not but from into when where which while its their there
than then they them you your can will would should could may might has have had been being does did also only more
most same any each every all some one two other use used using get got set error errors exception traceback file
line call recent last raise self return def none true false python site packages lib usr home envs named module c10
struct""".split())
# Spellings of one dtype that error texts and the catalog's prose use interchangeably.
_SYNONYMS = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float64": "fp64", "double": "fp64"}
_IDENT = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_PIECE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+[0-9]*|[0-9]+")


def _words(text: str) -> list[str]:
    """The words of a text for the wording fallback: identifiers lowercased, with their snake_case and CamelCase
    pieces (`GradScaler` -> gradscaler, grad, scaler), dtype spellings folded together, short and stop words out."""
    out: list[str] = []
    for ident in _IDENT.findall(text):
        forms = {ident.lower()}
        if "_" in ident or re.search(r"[a-z][A-Z]", ident):
            forms |= {p.lower() for piece in ident.split("_") for p in _PIECE.findall(piece)}
        out += [_SYNONYMS.get(w, w) for w in forms if len(w) > 2 and w not in _STOP]
    return out


def _pattern_words(sigs: Sequence[Signature]) -> list[str]:
    """The literal words of regexes: escapes such as \\b and \\w dropped, not read as the letters b and w."""
    return _words(" ".join(re.sub(r"\\[A-Za-z]", " ", s.pattern) for s in sigs))


@functools.lru_cache(maxsize=4)
def _wording_index(pool: tuple[Rule, ...]) -> tuple[list[tuple[Rule, Counter[str], int]], dict[str, float], float]:
    """Each rule's words (its catalog text, its signatures' and context's words weighed SIGNATURE_WORDS times) with
    the length of its prose, the words' BM25 idf over the rules' prose, and the mean length of a rule's prose."""
    docs = []
    prose_df: Counter[str] = Counter()
    for rule in pool:
        prose = _words(" ".join((rule.name.replace("-", " "), rule.summary, rule.why, rule.fix, rule.example,
                                 rule.use_instead)))
        bag = Counter(prose)
        prose_df.update(bag.keys())
        for word in _pattern_words(rule.signatures + rule.context):
            bag[word] += SIGNATURE_WORDS
        docs.append((rule, bag, len(prose)))
    n = len(docs)
    words = {w for _, bag, _ in docs for w in bag}
    idf = {w: math.log(1 + (n - k + 0.5) / (k + 0.5)) for w in words for k in (prose_df.get(w, SIGNATURE_ONLY_DF),)}
    mean = sum(length for *_, length in docs) / max(n, 1)
    return docs, idf, mean


@functools.lru_cache(maxsize=2)  # as `_ranked`: asked twice of one text by the CLI
def _closest_by_wording(text: str, pool: tuple[Rule, ...]) -> tuple[Candidate, ...]:
    """Rules ranked by BM25 between the text's words and each rule's catalog text: what explain can still offer
    when no signature matches. Every one is a guess, and scores below MIN_SCORE so that it never outranks a match."""
    docs, idf, mean = _wording_index(pool)
    query = set(_words(text))
    ranked = []
    for rule, bag, length in docs:
        shared = sorted((w for w in query if w in bag), key=lambda w: -idf[w])
        if len(shared) < CLOSEST_MIN_WORDS:
            continue
        norm = BM25_K1 * (1 - BM25_B + BM25_B * length / mean)
        bm25 = sum(idf[w] * bag[w] * (BM25_K1 + 1) / (bag[w] + norm) for w in shared)
        ranked.append((bm25, rule, shared))
    ranked.sort(key=lambda r: (-r[0], r[1].id))
    if not ranked:
        return ()
    best = ranked[0][0]
    return tuple(Candidate(rule, MIN_SCORE * bm25 / (bm25 + best), f"{CLOSEST_REASON} (shares {', '.join(shared[:6])})",
                      "", None, guess=True, context_matched=False, basis="wording")
                 for bm25, rule, shared in ranked)


def _as_guess(cand: Candidate, why: str = "") -> Candidate:
    return replace(cand, guess=True, reason=f"a guess: {cand.reason}{why}")


def _one_confident(scored: list[Candidate]) -> list[Candidate]:
    """Two rules each read with confidence (each its own specific message, or its message with its own context) mean
    the text shows two failures, and which one the user is asking about is not in the text: both become guesses."""
    confident = [c for c in scored if not c.guess]
    if len(confident) < 2:
        return scored
    return [c if c.guess else _as_guess(c, "; the text also shows " + ", ".join(
        o.rule.id for o in confident if o is not c) + " with confidence, so it holds more than one failure")
            for c in scored]


def _rivalled(scored: list[Candidate]) -> list[Candidate]:
    """A confident first answer with another rule's match scoring at least `RIVAL_SHARE` of it becomes a guess."""
    if len(scored) > 1 and not scored[0].guess and scored[1].score >= RIVAL_SHARE * scored[0].score:
        return [_as_guess(scored[0], f"; {scored[1].rule.id} fits the text nearly as well"), *scored[1:]]
    return scored


def explain_findings(text: str, *, limit: int = 3, location: Location | None = None) -> list[Finding]:
    """The top candidates as findings: the best one an error, the others info, for detectors
    (such as the runtime audit) that caught an exception and want it diagnosed. Only rules a signature matched: a
    rule whose catalog text is merely the closest in wording is no finding."""
    out = []
    for rank, cand in enumerate(explain(text, limit=limit, closest=False)):
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
