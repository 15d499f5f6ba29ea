"""Real-world lint precision: lint whole trees of training code as a new user would (the default rule set) and
count what it says, per tree and per rule.

    .venv/bin/python bench/realworld.py DIR [DIR ...] [--select RULES] [--show] [--markdown]
    .venv/bin/python bench/realworld.py --quick          # this repository's examples/, so the script cannot rot

A run on given trees replaces its block of docs/benchmarks.md (unless --no-docs); --quick writes nothing.

Prints, per tree: files checked, warnings+errors per 100 files, errors, and counts per rule; `--show` lists
every warning and error (to be read, one by one, and judged true or false).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from pathlib import Path

from ampdoctor.core import Severity
from ampdoctor.lint import LintSettings, lint_paths
from ampdoctor.lint.settings import rule_ids
from ampdoctor.report import Report

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # benchdocs, when imported from a test
import benchdocs  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = ["tree", "files", "warn+err", "per 100 files", "errors", "info", "input errors", "seconds"]


def measure(tree: Path, settings: LintSettings) -> tuple[Report, float]:
    start = time.perf_counter()
    report = lint_paths([tree], settings)
    return report, time.perf_counter() - start


def row(name: str, report: Report, seconds: float) -> dict:
    loud = [f for f in report.findings if f.severity.rank >= Severity.WARNING.rank]
    files = max(len(report.checked), 1)
    return {
        "tree": name,
        "files": len(report.checked),
        "warn+err": len(loud),
        "per 100 files": round(100 * len(loud) / files, 1),
        "errors": sum(f.severity is Severity.ERROR for f in report.findings),
        "info": sum(f.severity is Severity.INFO for f in report.findings),
        "input errors": len(report.errors),
        "seconds": round(seconds, 1),
        "rules": Counter(f"{f.rule_id} {f.severity.value}" for f in loud),
    }


def markdown_table(rows: list[dict]) -> str:
    return benchdocs.markdown_table(COLUMNS + ["rules (warn+err)"], [
        [r[c] for c in COLUMNS] + [", ".join(f"{k}: {v}" for k, v in sorted(r["rules"].items())) or "-"] for r in rows])


def print_table(rows: list[dict], markdown: bool) -> None:
    columns = COLUMNS
    if markdown:
        print("| " + " | ".join(columns) + " | rules (warn+err) |")
        print("|" + "---|" * (len(columns) + 1))
    for r in rows:
        rules = ", ".join(f"{k}: {v}" for k, v in sorted(r["rules"].items())) or "-"
        cells = [str(r[c]) for c in columns] + [rules]
        print(("| " + " | ".join(cells) + " |") if markdown else "  ".join(cells))


def _label(tree: Path, trees: list[Path]) -> str:
    """The tree's path below the folder all trees share (`accelerate/examples`, not a third `examples`)."""
    resolved = [t.resolve() for t in trees]
    common = Path(os.path.commonpath(resolved)) if len(resolved) > 1 else tree.resolve().parent
    return str(tree.resolve().relative_to(common)) or tree.name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trees", nargs="*", type=Path)
    parser.add_argument("--select", help="rules to check instead of the default set (ALL for every rule)")
    parser.add_argument("--show", action="store_true", help="print every warning and error")
    parser.add_argument("--markdown", action="store_true", help="print the table as markdown")
    parser.add_argument("--quick", action="store_true", help="lint this repository's examples/ only; no docs")
    parser.add_argument("--no-docs", action="store_true", help="do not write docs/benchmarks.md")
    args = parser.parse_args(argv)
    trees = [ROOT / "examples"] if args.quick else args.trees
    if not trees:
        parser.error("give the trees to lint, or --quick")
    settings = LintSettings()
    if args.select:
        settings = settings.override(select=rule_ids(args.select.split(","), "--select"))
    rows = []
    total = Report()
    for tree in trees:
        report, seconds = measure(tree, settings)
        rows.append(row(_label(tree, trees), report, seconds))
        total = total.merge(report)
        if args.show:
            for f in report.findings:
                if f.severity.rank >= Severity.WARNING.rank:
                    print(f"{f.location.file}:{f.location.line}: {f.severity.value} {f.rule_id} {f.name}: {f.message}")
    if len(rows) > 1:
        rows.append(row("all", total, sum(r["seconds"] for r in rows)))
    print_table(rows, args.markdown)
    if not (args.quick or args.no_docs):
        benchdocs.write_block("realworld", "## Real-world lint precision (bench/realworld.py)",
                              benchdocs.stamp() + "\n\nTrees: " + ", ".join(f"`{t}`" for t in trees) + "\n\n" + markdown_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
