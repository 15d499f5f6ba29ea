"""Terminal rendering with rich: findings grouped by file (or module), colour only on a TTY."""

from __future__ import annotations

import io
import re
from itertools import groupby
from typing import IO, Any, Sequence

from rich.console import Console
from rich.padding import Padding
from rich.table import Table as RichTable
from rich.text import Text

from ampdoctor.core import Finding, Severity
from ampdoctor.report.model import Report, Table, cause_chain, report_summary, root_cause
from ampdoctor.report.renderer import DOCUMENT, FINDINGS, MEASUREMENTS, Candidates, Renderer

_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


def _group(f: Finding) -> str:
    loc = f.location
    if loc.file:
        return loc.file
    if loc.module is not None:
        return f"module {loc.module or '<root>'}"
    return loc.label or "general"


def _where(f: Finding) -> str:
    loc = f.location
    if loc.file and loc.line:
        return f"{loc.line}:{loc.column or 1}"
    bits = [b for b in (loc.op, loc.phase) if b]
    return " ".join(bits)


_SOURCE = {"given": "given with --policy", "audit-default": "the audit's default; --policy sets another", "inferred": "inferred from what the run did", "default": "nothing to infer it from"}


def _info_lines(report: Report) -> list[str]:
    """The context a reader needs first: the policy an audit judged by, and a script that failed."""
    info = report.info
    lines = []
    if info.policy is not None:
        lines.append(f"policy: {info.policy} ({_SOURCE.get(str(info.policy_source), info.policy_source)})")
    if info.script_failed:
        lines.append(f"the script failed: {info.exception if info.exception is not None else 'exit code ' + str(info.script_exit_code)}")
    lines.extend(f"note: {note}" for note in info.notes)
    return lines


_INDEXED = re.compile(r"^(?P<head>(?:[^.]*\.)*?)(?P<index>\d+)(?P<tail>(?:\..*)?)$")
MAX_ROWS = 80  # a table's rows in text after grouping, unless --full
PROSE_WIDTH = 32  # what a column of prose needs at least to read well, when deciding whether headers may wrap


def _ranges(indices: list[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> "0-2,5,7-8"."""
    out, start = [], indices[0]
    for prev, cur in zip(indices, [*indices[1:], None]):
        if cur != prev + 1:
            out.append(f"{start}-{prev}" if prev > start else f"{start}")
            start = cur
    return ",".join(out)


def group_rows(rows: Sequence[Sequence[str]]) -> list[tuple[str, ...]]:
    """Rows of repeated layers in one: rows whose first cell differs only in its first integer path component
    (`layers.3.mlp`) and whose other cells are identical become one row `layers.0-31.mlp`, at the first one's place.
    A layer that differs keeps its own row, so nothing a row says is lost."""
    groups: dict[tuple, list[int]] = {}
    for row in rows:
        m = _INDEXED.match(row[0]) if row else None
        key = (m["head"], m["tail"], tuple(row[1:])) if m else (None, tuple(row), ())
        groups.setdefault(key, []).append(int(m["index"]) if m else 0)
    return [tuple(whole) if head is None else (f"{head}{_ranges(sorted(set(idx)))}{whole}", *cells)
            for (head, whole, cells), idx in groups.items()]


def write_text(report: Report, stream: IO[str], *, color: bool | None = None, width: int | None = None, full: bool = False) -> None:
    """Write the report; `color=None` colours only when `stream` is a terminal. Tables group repeated layers and show
    at most `MAX_ROWS` rows unless `full`."""
    # A terminal gets its own width and wrapped lines; files and pipes get a fixed table width and one
    # line per message, so reports do not depend on the caller and grep finds whole messages.
    tty = stream.isatty()
    console = Console(file=stream, force_terminal=color, no_color=color is False, width=width or (None if tty else 120), highlight=False, soft_wrap=not tty and width is None)
    for line in _info_lines(report):
        console.print(Text(line, style="bold"))
    for error in report.errors:
        console.print(Text("error: ", style="bold red") + Text(str(error)))

    def indented(text: Text, indent: int) -> None:
        # On a terminal wrapped lines stay under their text; files and pipes get whole lines.
        console.print(Padding(text, (0, 0, 0, indent)) if tty and width is None else Text(" " * indent) + text)

    root = root_cause(report)
    if root is not None:
        _write_root_cause(console, root, indented)
    rest = [f for f in report.findings if f is not root and f.library is None]
    if root is not None and rest:
        console.print(Text("other findings", style="bold"))
    _write_findings(console, rest, indented)
    inside = [f for f in report.findings if f is not root and f.library is not None]
    if inside:
        console.print(Text("inside installed libraries (not your code; notes about what the library does)", style="bold"))
        _write_findings(console, inside, indented)
    for table in report.tables:
        _write_table(console, table, full)
    console.print(Text(report_summary(report), style="bold"))


def _write_findings(console: Console, findings: list[Finding], indented: Any) -> None:
    for group, items in groupby(findings, key=_group):
        console.print(Text(group, style="bold underline"))
        for f in items:
            line = Text()
            where = _where(f)
            if where:
                line.append(f"{where} ", style="dim")
            line.append(f"{f.severity.value} ", style=_STYLE[f.severity])
            line.append(f"{f.rule_id} {f.name}", style="bold")
            line.append(f": {f.message}")
            indented(line, 2)
            if f.origin is not None:
                indented(Text(f"origin: {f.origin}", style="magenta"), 6)
            for rel in f.related:
                indented(Text(f"related: {rel}", style="dim"), 6)
            indented(Text(f"fix: {f.fix}", style="green"), 6)


def _write_root_cause(console: Console, f: Finding, indented: Any) -> None:
    """A failing run opens with its root cause: the rule, what happened, the chain from the failing op back to the
    origin with each step's place, and the fix; everything else is listed below it."""
    head = Text("root cause: ", style="bold")
    head.append(f"{f.severity.value} ", style=_STYLE[f.severity])
    head.append(f"{f.rule_id} {f.name}", style="bold")
    console.print(head)
    indented(Text(f.message), 2)
    for n, (step, loc) in enumerate(cause_chain(f), 1):
        indented(Text(f"{n}. {step}: {loc}", style="magenta" if step == "origin" else ""), 2)
    if f.details.get("folded"):
        indented(Text(f"on the same chain (folded into it): {'; '.join(f.details['folded'])}", style="dim"), 2)
    indented(Text(f"fix: {f.fix}", style="green"), 2)


def _column_widths(header: Sequence[str], rows: list, width: int) -> list[int | None]:
    """The first column names things (module paths) and is never split. A column of single tokens (numbers, dtypes)
    is held to its widest cell, with its header on one line where the table fits `width` that way, else wrapped
    between its words: the width left goes to the columns of prose, which wrap between words, not mid-word."""
    columns = [[str(row[i]) for row in rows if i < len(row)] for i in range(len(header))]
    tokens = [bool(cells) and not any(any(ch.isspace() for ch in c) for c in cells) for cells in columns]
    cell_width = [max((len(c) for c in cells), default=0) for cells in columns]
    whole = [max(cell_width[i], len(str(col))) for i, col in enumerate(header)]
    prose = sum(min(cell_width[i], PROSE_WIDTH) for i in range(1, len(header)) if not tokens[i])
    fits = whole[0] + prose + sum(whole[i] for i in range(1, len(whole)) if tokens[i]) + 3 * len(whole) + 1 <= width
    return [None] + [(whole[i] if fits else max([cell_width[i]] + [len(w) for w in str(col).split()])) if tokens[i] else None
                     for i, col in enumerate(header) if i]


def _write_table(console: Console, table: Table, full: bool) -> None:
    rich_table = RichTable(title=table.title, title_justify="left", show_lines=False)
    rows = list(table.rows) if full else group_rows(table.rows)
    shown_rows = rows if full else rows[:MAX_ROWS]
    for i, (col, widest) in enumerate(zip(table.columns, _column_widths(table.columns, shown_rows, console.width))):
        rich_table.add_column(col, overflow="fold", no_wrap=i == 0, max_width=widest)
    for row in shown_rows:
        rich_table.add_row(*row)
    console.print(rich_table)
    if len(rows) < len(table.rows) or (not full and len(rows) > MAX_ROWS):
        shown = min(len(rows), MAX_ROWS)
        console.print(Text(f"{len(table.rows)} rows shown as {shown} (repeated layers grouped"
                           f"{f', {len(rows) - shown} more not shown' if len(rows) > shown else ''}); --full shows every row", style="dim"))


def render_text(report: Report, *, color: bool = False, width: int | None = None, full: bool = False) -> str:
    buffer = io.StringIO()
    write_text(report, buffer, color=color, width=width, full=full)
    return buffer.getvalue()


def write_statistics(report: Report, stream: IO[str], *, color: bool | None = None) -> None:
    """`ampdoctor lint --statistics`: one line per rule, most frequent first, as ruff prints them."""
    from collections import Counter

    tty = stream.isatty()
    console = Console(file=stream, force_terminal=color, no_color=color is False, width=None if tty else 120, highlight=False, soft_wrap=not tty)
    for error in report.errors:
        console.print(Text("error: ", style="bold red") + Text(str(error)))
    counted = Counter((f.rule_id, f.name, f.severity) for f in report.findings)
    for (rule_id, name, severity), n in sorted(counted.items(), key=lambda kv: (-kv[1], kv[0][0])):
        console.print(Text(f"{n:>6}  ") + Text(rule_id, style="bold") + Text(f"  {name}  ") + Text(severity.value, style=_STYLE[severity]))
    console.print(Text(report_summary(report), style="bold"))


def write_candidates_text(answer: Candidates, stream: IO[str]) -> None:
    from ampdoctor.report.candidates import write_candidates

    write_candidates(answer.candidates, stream, hidden=answer.hidden)


RENDERER = Renderer("text", lambda report, stream, full: write_text(report, stream, full=full), ".txt", "text",
                    kinds=frozenset({FINDINGS, MEASUREMENTS, DOCUMENT}), write_candidates=write_candidates_text, write_statistics=write_statistics)
