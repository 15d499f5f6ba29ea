"""Fuzz the config readers and the CLI with the structure-aware generators of tests/fuzzgen.py (issue 11): every
framework's key schema with values of the wrong type, YAML anchors and merge keys, BOMs, CRLF and cut files; folders
of FIFOs, symlink loops, dangling links, folders named x.json, unreadable files; argument vectors for
lint/explain/rules/export run in-process through ampdoctor.cli.main.

    .venv/bin/python bench/fuzz.py                  # >= 10,000 inputs; replaces its block of docs/benchmarks.md
    .venv/bin/python bench/fuzz.py --quick          # a few inputs per generator; writes nothing

Counts, per generator: inputs, uncaught exceptions, hangs (an input over the time bound), other violated invariants
(an input error naming no file or echoing a huge value, a CLI exit code outside 0/1/2, a traceback in the CLI's
output), and the median and largest time per input. Exits 1 when any input failed, listing the first failures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # benchdocs, when imported from a test
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))  # fuzzgen: the generators the test suite runs too
import benchdocs  # noqa: E402
import fuzzgen  # noqa: E402

# Inputs per generator in a full run: 12 config generators x 550, trees 1,500, the CLI 2,500 = 10,600.
FULL = {name: 550 for name in fuzzgen.GENERATORS if name.startswith("config:")} | {"tree": 1500, "cli": 2500}
QUICK = 5


def run(name: str, examples: int, seed: int, bound: float) -> dict:
    times: list[float] = []
    counts: Counter[str] = Counter()
    failures: list[str] = []

    def record(case: fuzzgen.Case, out: fuzzgen.Outcome) -> None:
        times.append(out.seconds)
        counts["exceptions"] += out.exception is not None
        counts["hangs"] += out.hang
        counts["violations"] += bool(out.violations)
        counts["with findings"] += out.findings > 0
        counts["with input errors"] += out.input_errors > 0
        for code in out.exit_codes:
            counts[f"exit {code}"] += 1
        if not out.ok and len(failures) < 5:
            failures.append(out.describe(case)[:3000])

    start = time.perf_counter()
    fuzzgen.explore(name, examples, record, seed=seed, bound=bound)
    return {"generator": name, "inputs": len(times), "counts": counts, "failures": failures, "seconds": time.perf_counter() - start,
            "median_ms": 1000 * statistics.median(times) if times else 0.0, "max_ms": 1000 * max(times, default=0.0)}


def table(rows: list[dict]) -> str:
    header = ["generator", "inputs", "uncaught exceptions", "hangs", "other violations", "with findings", "with input errors",
              "median ms/input", "max ms/input"]
    body = [[r["generator"], r["inputs"], r["counts"]["exceptions"], r["counts"]["hangs"], r["counts"]["violations"],
             *(["-", "-"] if r["generator"] == "cli" else [r["counts"]["with findings"], r["counts"]["with input errors"]]),
             f"{r['median_ms']:.1f}", f"{r['max_ms']:.0f}"] for r in rows]  # the CLI's reports are text: its exit codes say instead
    total = [sum(r["inputs"] for r in rows), *(sum(r["counts"][k] for r in rows) for k in ("exceptions", "hangs", "violations",
                                                                                            "with findings", "with input errors"))]
    everything = [r["median_ms"] for r in rows]
    body.append(["all", *total, f"{statistics.median(everything):.1f} (median of medians)" if everything else "-",
                 f"{max((r['max_ms'] for r in rows), default=0):.0f}"])
    return benchdocs.markdown_table(header, body)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=f"{QUICK} inputs per generator; no docs")
    parser.add_argument("--seed", type=int, default=11, help="hypothesis seed (default 11)")
    parser.add_argument("--bound", type=float, default=fuzzgen.BOUND_S, help=f"seconds one input may take (default {fuzzgen.BOUND_S})")
    parser.add_argument("--only", metavar="GENERATOR", action="append", choices=sorted(fuzzgen.GENERATORS), help="run only these generators")
    parser.add_argument("--no-docs", action="store_true", help="do not write docs/benchmarks.md")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    rows = []
    for name, examples in FULL.items():
        if args.only and name not in args.only:
            continue
        rows.append(run(name, QUICK if args.quick else examples, args.seed, args.bound))
        r = rows[-1]
        print(f"{name}: {r['inputs']} inputs in {r['seconds']:.1f} s, {r['counts']['exceptions']} exceptions, {r['counts']['hangs']} hangs, "
              f"{r['counts']['violations']} violations", file=sys.stderr)
    wall = time.perf_counter() - start
    text = table(rows)
    codes = sum((r["counts"] for r in rows if r["generator"] == "cli"), Counter())
    exits = ", ".join(f"{k}: {v}" for k, v in sorted(codes.items()) if k.startswith("exit ")) or "-"
    print(text)
    print(f"\nCLI exit codes: {exits}. Time bound {args.bound} s per input; running as root: {fuzzgen.IS_ROOT}.")
    failures = [f for r in rows for f in r["failures"]]
    for failure in failures:
        print("\nFAILED: " + failure)
    if not (args.quick or args.no_docs or args.only):
        root_note = (" Run as root, where chmod 000 denies nothing: the unreadable files were read like any other (the"
                     " test suite covers refused reads with a FIFO and a folder instead).") if fuzzgen.IS_ROOT else ""
        benchdocs.write_block("fuzz", "## Fuzzing the config readers and the CLI (bench/fuzz.py)",
                              benchdocs.stamp(wall) + f"\n\nStructure-aware inputs (tests/fuzzgen.py), hypothesis seed {args.seed}, "
                              f"each under a {args.bound} s bound (over it counts as a hang). An input is one generated case: a "
                              "config (with what it points at or merges with) linted with `lint_config_files`; a folder of "
                              "configs and odd file kinds linted as a tree, entry by entry and as named files; or one argument "
                              "vector run through `ampdoctor.cli.main`. \"with findings\" and \"with input errors\" show the "
                              f"inputs reach the rules and the error paths.{root_note}\n\n" + text + f"\n\nCLI exit codes: {exits}.")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
