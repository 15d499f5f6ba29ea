"""Benchmark of the Python lint (not a test): files, wall time for bare `ast.parse` of the same files,
`ampdoctor lint` (the library call, all rules, N worker processes) and ruff if installed, plus the warnings the
linter gives, for the false-positive review in docs/benchmarks.md.

    .venv/bin/python bench/lint_python_bench.py [TREE ...] [--jobs 2] [--show]     # updates docs/benchmarks.md
    .venv/bin/python bench/lint_python_bench.py --quick      # this repository's src/, one process; no docs
Default trees: the installed transformers `models` package and torch's own Python sources.
"""

from __future__ import annotations

import argparse
import ast
import collections
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from ampdoctor.lint.python import lint_python_files

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # benchdocs, when imported from a test
import benchdocs  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def default_trees() -> list[Path]:
    import torch
    import transformers

    return [Path(transformers.__file__).parent / "models", Path(torch.__file__).parent]


def parse_only(paths: list[str]) -> int:
    for path in paths:
        try:
            ast.parse(Path(path).read_bytes())
        except (SyntaxError, ValueError):
            pass
    return len(paths)


def time_parse(files: list[str], jobs: int) -> float:
    start = time.perf_counter()
    if jobs == 1:
        parse_only(files)
        return time.perf_counter() - start
    chunks = [files[i::jobs * 16] for i in range(jobs * 16)]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        sum(pool.map(parse_only, chunks))
    return time.perf_counter() - start


def time_ruff(tree: Path) -> float | None:
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not os.path.exists(ruff):
        return None
    start = time.perf_counter()
    subprocess.run([ruff, "check", "--no-cache", "--isolated", "--select", "E9,F", "--quiet", "--exit-zero", str(tree)],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trees", nargs="*", type=Path)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--show", action="store_true", help="print every warning (for the false-positive review)")
    parser.add_argument("--quick", action="store_true", help="lint this repository's src/ in one process; no docs")
    parser.add_argument("--no-docs", action="store_true", help="do not write docs/benchmarks.md")
    parser.add_argument("--repeats", type=int, default=3, help="parse and lint alternately this many times; the minima")
    args = parser.parse_args(argv)
    if args.quick:
        args.trees, args.jobs, args.repeats = [ROOT / "src"], 1, 1
    rows = []
    print(f"machine: {os.cpu_count()} CPU cores, Python {sys.version.split()[0]}, jobs={args.jobs}, "
          f"load average {os.getloadavg()[0]:.2f}")
    for tree in args.trees or default_trees():
        rows.append(bench_tree(tree, args))
    table = benchdocs.markdown_table(["tree", "files", "ast.parse only s", "ampdoctor lint s", "ruff (E9,F) s", "warnings",
                                      "input errors"], rows)
    print("\n" + table)
    if not (args.quick or args.no_docs):
        benchdocs.write_block("lint-speed", "## Python lint speed (bench/lint_python_bench.py)",
                              benchdocs.stamp() + f"\n\n{args.jobs} worker process(es); files read once before timing; parse and lint "
                              f"alternately, the minimum of {args.repeats} each; ruff only when installed:\n\n" + table)
    return 0


def bench_tree(tree: Path, args: argparse.Namespace) -> list[object]:
    """Time parse / lint / ruff on one tree; print the details; return its table row."""
    files = sorted(str(p) for p in tree.rglob("*.py"))
    # Read every file once first: whichever is timed first would otherwise pay the disk reads for both. Then both,
    # alternately, best of `repeats`. The bare parse runs with the cycle collector on, as a plain loop does (the
    # lint's workers pause it; docs/benchmarks.md says what that is worth).
    for path in files:
        Path(path).read_bytes()
    parse_times, lint_times = [], []
    for _ in range(args.repeats):
        parse_times.append(time_parse(files, args.jobs))
        start = time.perf_counter()
        report = lint_python_files([Path(f) for f in files], jobs=args.jobs)
        lint_times.append(time.perf_counter() - start)
    parse_s, lint_s = min(parse_times), min(lint_times)
    ruff_s = time_ruff(tree)
    counts = collections.Counter(f.name for f in report.findings)
    print(f"\n{tree}\n  files: {len(files)}\n  ast.parse only: {parse_s:.2f} s\n  ampdoctor lint: {lint_s:.2f} s"
          f"\n  ruff check (E9,F): {'not installed' if ruff_s is None else f'{ruff_s:.2f} s'}"
          f"\n  warnings: {len(report.findings)} on {len({f.location.file for f in report.findings})} files "
          f"({dict(counts)}); input errors: {len(report.errors)}")
    if args.show:
        for f in report.findings:
            print(f"    {f.location.file}:{f.location.line}:{f.location.column} {f.name}: {f.message}")
        for e in report.errors:
            print(f"    error {e}")
    return [tree.name, len(files), f"{parse_s:.2f}", f"{lint_s:.2f}", "-" if ruff_s is None else f"{ruff_s:.2f}",
            len(report.findings), len(report.errors)]


if __name__ == "__main__":
    sys.exit(main())
