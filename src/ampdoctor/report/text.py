"""Terminal rendering with rich: findings grouped by file (or module), colour only on a TTY."""

from __future__ import annotations

import io
from itertools import groupby
from typing import IO

from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from ampdoctor.report.model import Report, report_summary
from ampdoctor.rules import Finding, Severity

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


_SOURCE = {"given": "given with --policy", "inferred": "inferred from what the run did", "default": "nothing to infer it from"}


def _info_lines(report: Report) -> list[str]:
    """The context a reader needs first: the policy an audit judged by, and a script that failed."""
    info = report.info
    lines = []
    if "policy" in info:
        lines.append(f"policy: {info['policy']} ({_SOURCE.get(str(info.get('policy_source')), info.get('policy_source'))})")
    if info.get("script_failed"):
        lines.append(f"the script failed: {info.get('exception', 'exit code ' + str(info.get('script_exit_code')))}")
    lines.extend(f"note: {note}" for note in info.get("notes", ()))
    return lines


def write_text(report: Report, stream: IO[str], *, color: bool | None = None, width: int | None = None) -> None:
    """Write the report; `color=None` colours only when `stream` is a terminal."""
    # A terminal gets its own width and wrapped lines; files and pipes get a fixed table width and one
    # line per message, so reports do not depend on the caller and grep finds whole messages.
    tty = stream.isatty()
    console = Console(file=stream, force_terminal=color, no_color=color is False, width=width or (None if tty else 120), highlight=False, soft_wrap=not tty and width is None)
    for line in _info_lines(report):
        console.print(Text(line, style="bold"))
    for error in report.errors:
        console.print(Text("error: ", style="bold red") + Text(str(error)))
    for group, items in groupby(report.findings, key=_group):
        console.print(Text(group, style="bold underline"))
        for f in items:
            line = Text("  ")
            where = _where(f)
            if where:
                line.append(f"{where} ", style="dim")
            line.append(f"{f.severity.value} ", style=_STYLE[f.severity])
            line.append(f"{f.rule_id} {f.name}", style="bold")
            line.append(f": {f.message}")
            console.print(line)
            if f.origin is not None:
                console.print(Text(f"      origin: {f.origin}", style="magenta"))
            for rel in f.related:
                console.print(Text(f"      related: {rel}", style="dim"))
            console.print(Text(f"      fix: {f.fix}", style="green"))
    for table in report.tables:
        rich_table = RichTable(title=table.title, title_justify="left", show_lines=False)
        for col in table.columns:
            rich_table.add_column(col, overflow="fold")
        for row in table.rows:
            rich_table.add_row(*row)
        console.print(rich_table)
    console.print(Text(report_summary(report), style="bold"))


def render_text(report: Report, *, color: bool = False, width: int | None = None) -> str:
    buffer = io.StringIO()
    write_text(report, buffer, color=color, width=width)
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
