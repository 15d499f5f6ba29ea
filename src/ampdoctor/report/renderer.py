"""What an output format is: one `Renderer` per format, registered in `report.registry`.

A renderer writes a findings `Report`; it may also write `explain`'s ranked candidates and `lint --statistics` in a
form of its own. A format that has no candidates form gets the candidates as findings (its report form); one that
has no statistics form cannot be asked for `--statistics`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO, Any, Callable, Sequence

from ampdoctor.core import Finding
from ampdoctor.report.model import Report

# The kinds of report a command produces, for the formats it offers: findings about an input (lint, run, audit,
# explain); measurements against a reference (compare: per-module error tables and charts); a document of the
# command's own (rules, env, rope), written as data by a format with a data form (JSON) and as the command's own
# view by the others.
FINDINGS = "findings"
MEASUREMENTS = "measurements"
DOCUMENT = "document"


@dataclass(frozen=True)
class Candidates:
    """`explain`'s answer: the ranked candidate rules, how many weaker ones were left out, and the same answer as
    findings (computed only for a format that renders reports alone)."""

    candidates: Sequence[Any]
    hidden: int
    as_findings: Callable[[], Sequence[Finding]]


@dataclass(frozen=True)
class Renderer:
    """One output format. `write(report, stream, full)` writes a report (`full`: every table row, for text);
    `kinds`: the report kinds it can render; `extension`: of a file holding its output; `label`: its name in
    messages. `write_candidates` and `write_statistics` are its forms of `explain`'s candidates and of
    `lint --statistics`, when it has them; `write_data`, its form of a command's own document (JSON data)."""

    name: str
    write: Callable[[Report, IO[str], bool], None]
    extension: str
    label: str
    kinds: frozenset[str] = frozenset({FINDINGS, MEASUREMENTS})
    write_candidates: Callable[[Candidates, IO[str]], None] | None = None
    write_statistics: Callable[[Report, IO[str]], None] | None = None
    write_data: Callable[[Any, IO[str]], None] | None = None

    def render_candidates(self, answer: Candidates, stream: IO[str]) -> None:
        if self.write_candidates is not None:
            self.write_candidates(answer, stream)
        else:
            self.write(Report.of(answer.as_findings()), stream, False)
