"""What `ampdoctor lint --fix` would change in the ecosystem corpus, and whether it ever rewrites a false finding.

    PYTHONPATH=src .venv/bin/python bench/ecosystem/fixes.py [--cache DIR] [--only NAME,...]

For each repository of bench/ecosystem/repos.yaml already extracted at its pinned commit into the cache folder (by
bench/ecosystem/ecosystem.py; this script extracts nothing and writes nothing there), lint the tree for the rules
that have a rewrite, compute the rewrites (`ampdoctor.lint.rewrite.rewrites`, which reads and never writes) and list
each file they would change with the findings the rewrite addresses (those whose own rule's rewrite changes their line)
and their verdicts in bench/ecosystem/verdicts.yaml (keyed as ecosystem.py keys them: NAME:FINGERPRINT; notes,
such as findings in test code, are not judged there). Exits 1 when a rewritten finding is judged false: a fix
must never act on a finding that is wrong.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import yaml
from ecosystem import MANIFEST, VERDICTS, load_verdicts

from ampdoctor.core.registry import fixes
from ampdoctor.lint import LintSettings, lint_paths
from ampdoctor.lint.baseline import fingerprint
from ampdoctor.lint.rewrite import Rewrite, rewrites


def changed_lines(rw: Rewrite) -> set[int]:
    """The lines of the file before the rewrite that it replaces (1-based)."""
    matcher = difflib.SequenceMatcher(a=rw.before.splitlines(), b=rw.after.splitlines(), autojunk=False)
    return {i + 1 for tag, a0, a1, _, _ in matcher.get_opcodes() if tag != "equal" for i in range(a0, a1)}


def repository(name: str, tree: Path, verdicts: dict) -> list[dict]:
    """One row per file the rewrites would change, with the findings they address and their verdicts."""
    settings = LintSettings(jobs=1).override(select=frozenset(fixes()))
    report = lint_paths([tree], settings)
    # each rule's rewrite alone: a finding is addressed where its own rule's rewrite changes its line (another
    # rule's rewrite of the same line, `torch.cuda.amp` respelled, says nothing of it)
    by_rule = {rule: {rw.path: changed_lines(rw) for rw in rewrites(f for f in report.findings if f.rule_id == rule)}
               for rule in sorted({f.rule_id for f in report.findings})}
    lines_of: dict[str, list[str] | None] = {}
    rows = []
    for rw in rewrites(report.findings):
        rel = Path(rw.path).resolve().relative_to(tree.resolve()).as_posix()
        lines_of[rel] = rw.before.splitlines()
        touched = changed_lines(rw)
        addressed = []
        for f in report.findings:
            if f.location.file != rw.path or f.location.line not in by_rule[f.rule_id].get(rw.path, ()):
                continue
            key = f"{name}:{fingerprint(replace(f, location=replace(f.location, file=rel)), lines_of)}"
            verdict = (verdicts.get(key) or {}).get("verdict") or ("note" if f.severity.value == "info" else "unjudged")
            addressed.append({"rule": f.rule_id, "line": f.location.line, "severity": f.severity.value, "verdict": verdict, "key": key})
        rows.append({"repo": name, "file": rel, "rules": rw.rules, "changed": len(touched), "findings": addressed})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("AMPDOCTOR_ECOSYSTEM_CACHE", "/work/ecosystem-cache")))
    parser.add_argument("--only", help="comma-separated repository names")
    args = parser.parse_args(argv)
    entries = yaml.safe_load(MANIFEST.read_text())["repos"]
    if args.only:
        entries = [e for e in entries if e["name"] in set(args.only.split(","))]
    verdicts = load_verdicts(VERDICTS)
    rows, absent = [], []
    for e in entries:
        tree = args.cache / e["name"]
        done = tree / ".ecosystem-commit"
        if not done.exists() or done.read_text().split("\n")[0].split(" ")[0] != e["commit"]:
            absent.append(e["name"])
            continue
        rows += repository(e["name"], tree, verdicts)
    for row in rows:
        said = ", ".join(f"{f['rule']}:{f['line']} {f['severity']} {f['verdict']}" for f in row["findings"]) or "no finding on a changed line"
        print(f"{row['repo']} {row['file']}: {'+'.join(row['rules'])}, {row['changed']} line(s) changed; {said}")
    tally = Counter((f["rule"], f["verdict"]) for row in rows for f in row["findings"])
    false = [(row, f) for row in rows for f in row["findings"] if f["verdict"] == "false"]
    print(f"\n{len(rows)} file(s) rewritten in {len({r['repo'] for r in rows})} of {len(entries) - len(absent)} repositories "
          f"({', '.join(absent) + ' not extracted' if absent else 'all extracted'})")
    for (rule, verdict), n in sorted(tally.items()):
        print(f"  {rule} {verdict}: {n}")
    for row, f in false:
        print(f"FALSE FINDING REWRITTEN: {row['repo']} {row['file']}:{f['line']} {f['rule']} ({f['key']})")
    return 1 if false else 0


if __name__ == "__main__":
    sys.exit(main())
