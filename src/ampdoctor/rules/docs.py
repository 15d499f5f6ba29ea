"""Rule documentation, generated from the catalog: the terminal views of `ampdoctor rules` and
docs/rules.md (`python -m ampdoctor.rules.docs > docs/rules.md`)."""

from __future__ import annotations

import sys
from typing import IO, Any, Iterable

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ampdoctor.rules.catalog import catalog
from ampdoctor.rules.model import Rule


def rule_to_dict(rule: Rule) -> dict[str, Any]:
    return {
        "id": rule.id,
        "name": rule.name,
        "severity": rule.severity.value,
        "summary": rule.summary,
        "why": rule.why,
        "fix": rule.fix,
        "detectors": list(rule.detectors),
        "incident": rule.incident or None,
        "example": rule.example or None,
        "use_instead": rule.use_instead or None,
        "signatures": [s.pattern for s in rule.signatures],
        "sources": [{"repo": s.repo, "number": s.number, "pull_request": s.pull_request, "note": s.note, "url": s.url} for s in rule.sources],
    }


def _console(stream: IO[str]) -> Console:
    return Console(file=stream, width=110, highlight=False)


def write_rule_table(rules: Iterable[Rule], stream: IO[str]) -> None:
    table = Table(show_lines=False)
    for col in ("id", "name", "severity", "detectors", "summary"):
        table.add_column(col, overflow="fold")
    for r in rules:
        table.add_row(r.id, r.name, r.severity.value, ",".join(r.detectors), r.summary)
    _console(stream).print(table)


def write_rule(rule: Rule, stream: IO[str]) -> None:
    console = _console(stream)
    console.print(Text(f"{rule.id} {rule.name}", style="bold") + Text(f"  [{rule.severity.value}; {', '.join(rule.detectors)}]", style="dim"))
    if rule.incident:
        console.print(Text(f"incident {rule.incident}", style="dim"))
    for title, body in (("What it does", rule.summary), ("Why is this bad?", rule.why), ("Fix", rule.fix)):
        console.print(Text(title, style="bold underline"))
        console.print(body)
    for title, code in (("Example", rule.example), ("Use instead", rule.use_instead)):
        if code:
            console.print(Text(title, style="bold underline"))
            console.print(Text(code))
    if rule.signatures:
        console.print(Text("Error texts it explains", style="bold underline"))
        for sig in rule.signatures:
            console.print(f"  /{sig.pattern}/")
    console.print(Text("References", style="bold underline"))
    for src in rule.sources:
        console.print(f"  {src}  {src.url}")


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def rules_markdown(rules: Iterable[Rule] | None = None) -> str:
    rules = list(rules if rules is not None else catalog())
    lines = [
        "# Rules",
        "",
        "<!-- Generated from src/ampdoctor/rules/catalog.yaml by `make docs`; do not edit by hand. -->",
        "",
        f"{len(rules)} rules. Detectors: **config** (`ampdoctor lint` on configs), **code** (`ampdoctor lint` on Python),",
        "**runtime** (`ampdoctor run` / `ampdoctor.audit`), **explain** (`ampdoctor explain` on error text).",
        "",
        "| id | name | severity | detectors | summary |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| [{r.id}](#{r.id.lower()}-{r.name}) | `{r.name}` | {r.severity.value} | {', '.join(r.detectors)} | {_cell(r.summary)} |" for r in rules]
    for r in rules:
        lines += ["", f"## {r.id} {r.name}", "", f"Severity: **{r.severity.value}** · detectors: {', '.join(r.detectors)}" + (f" · incident {r.incident}" if r.incident else ""), ""]
        lines += ["### What it does", "", r.summary, "", "### Why is this bad?", "", r.why, ""]
        if r.example:
            lines += ["### Example", "", "```python", r.example, "```", ""]
        if r.use_instead:
            lines += ["### Use instead", "", "```python", r.use_instead, "```", ""]
        lines += ["### Fix", "", r.fix, ""]
        if r.signatures:
            lines += ["### Error texts it explains", ""] + [f"- `{s.pattern}`" for s in r.signatures] + [""]
        lines += ["### References", ""] + [f"- [{s}]({s.url})" for s in r.sources]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(rules_markdown())
