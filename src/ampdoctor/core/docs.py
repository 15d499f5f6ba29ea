"""Rule documentation, generated from the catalog: the terminal views of `ampdoctor rules` and
docs/rules.md (`python -m ampdoctor.core.docs > docs/rules.md`)."""

from __future__ import annotations

import sys
from typing import IO, Iterable

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ampdoctor.core.catalog import catalog
from ampdoctor.core.model import Rule, Signature
from ampdoctor.core.registry import detectors


def _signature_line(s: Signature) -> str:
    """A signature as the docs list it: its pattern, where it does not read a text, where it reads one only as a guess."""
    return (f"- `{s.pattern}`" + (f" (not where `{s.unless}` is in the text)" if s.unless else "")
            + (f" (a guess where `{s.doubt}` is in the text)" if s.doubt else ""))


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
    for title, body in (("What it does", rule.summary), ("Why is this bad?", rule.why), ("Severity", rule.severity_note),
                        ("Fix", rule.fix)):
        if body:
            console.print(Text(title, style="bold underline"))
            console.print(body)
    for title, code in (("Example", rule.example), ("Use instead", rule.use_instead)):
        if code:
            console.print(Text(title, style="bold underline"))
            console.print(Text(code))
    console.print(Text("Detectors", style="bold underline"))
    for detector in detectors(rule_id=rule.id):
        console.print(f"  {detector.kind:<8} {detector.where}")
    if rule.signatures:
        console.print(f"  {'explain':<8} the error signatures below (`ampdoctor explain`)")
    if rule.signatures:
        console.print(Text("Error texts it explains", style="bold underline"))
        for sig in rule.signatures:
            console.print(Text(f"  /{sig.pattern}/"))  # a regex, not rich markup: `[/\\]` would read as a closing tag
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
        f"{len(rules)} rules. Detectors: **policy** (a predicate over the effective precision policy and what is known about the run:",
        "`ampdoctor lint` on configs, `Policy.validate()`, `PrecisionStep` and the runtime audit all ask it), **code** (`ampdoctor lint`",
        "on Python), **runtime** (`ampdoctor run` / `ampdoctor.audit` on the recorded ops), **ranks** (rank 0 of a distributed audit,",
        "across what every rank reported), **numerics** (`ampdoctor compare` on errors measured against a float64 reference),",
        "**explain** (`ampdoctor explain` on error text). Each rule's detectors live in `src/ampdoctor/rules/ampNNN_<name>.py` and its fixtures in `tests/rules/AMPNNN-<name>/`.",
        "",
        "| id | name | severity | detectors | summary |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| [{r.id}](#{r.id.lower()}-{r.name}) | `{r.name}` | {r.severity.value} | {', '.join(r.detectors)} | {_cell(r.summary)} |" for r in rules]
    for r in rules:
        lines += ["", f"## {r.id} {r.name}", "", f"Severity: **{r.severity.value}** · detectors: {', '.join(r.detectors)}" + (f" · incident {r.incident}" if r.incident else ""), ""]
        lines += ["### What it does", "", r.summary, "", "### Why is this bad?", "", r.why, ""]
        lines += ["### Severity", "", r.severity_note, ""] if r.severity_note else []
        if r.example:
            lines += ["### Example", "", "```python", r.example, "```", ""]
        if r.use_instead:
            lines += ["### Use instead", "", "```python", r.use_instead, "```", ""]
        lines += ["### Fix", "", r.fix, ""]
        if r.signatures:
            lines += ["### Error texts it explains", ""] + [_signature_line(s) for s in r.signatures] + [""]
        lines += ["### Detectors", ""] + [f"- {d.kind}: `{d.fn.__name__}` in `{d.file}`" for d in detectors(rule_id=r.id)]
        lines += ["- explain: the error texts above"] if r.signatures else []
        lines += ["", "### References", ""] + [f"- [{s}]({s.url})" for s in r.sources]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(rules_markdown())
