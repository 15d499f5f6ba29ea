"""Shared by the bench scripts: a one-line description of the machine, markdown tables, and the generated
blocks of docs/benchmarks.md.

A bench script owns one block, between ``<!-- bench:NAME:begin -->`` and ``<!-- bench:NAME:end -->``; it
rewrites only that block (command, machine, date, table), so the hand-written discussion around it stays.
A block that is missing is appended under its own heading.
"""

from __future__ import annotations

import hashlib
import os
import platform
import sys
import time
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> str:
    """CPU, cores, GPU if any, torch and Python versions: what a reader needs to compare numbers."""
    import torch

    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"
    return (f"{cpu_model()}, {os.cpu_count()} cores, {gpu}; torch {torch.__version__}, Python {platform.python_version()}, "
            f"{torch.get_num_threads()} torch threads")


def load() -> str:
    """The 1-minute load average: on a shared machine a number means little without it."""
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:
        return "n/a"


def command() -> str:
    """The command that ran, as a reader would retype it from the repository root."""
    script = Path(sys.argv[0]).resolve()
    try:
        script = script.relative_to(DOCS.parents[1])
    except ValueError:
        pass
    return " ".join([".venv/bin/python", str(script), *sys.argv[1:]])


def markdown_table(header: list[str], rows: list[list[object]]) -> str:
    """A markdown table of ``rows`` (cells formatted by the caller) under ``header``."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def stamp(wall_s: float | None = None) -> str:
    """Command, machine, date (and wall time) lines for a generated block."""
    when = time.strftime("%Y-%m-%d %H:%M %Z")
    wall = f", wall time {wall_s / 60:.1f} min" if wall_s is not None else ""
    return f"Command:\n\n    {command()}\n\nMachine: {machine()}. Run {when}{wall}; 1-minute load average at the end {load()}."


def write_block(name: str, heading: str, body: str, path: Path | None = None) -> None:
    """Replace the generated block ``name`` of docs/benchmarks.md with ``body`` (appended under ``heading`` if new)."""
    path = path or DOCS
    begin, end = f"<!-- bench:{name}:begin -->", f"<!-- bench:{name}:end -->"
    block = f"{begin}\n{body.strip()}\n{end}"
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + f"\n\n{heading}\n\n{block}\n"
    path.write_text(text)


def split_of(name: str) -> str:
    """The split of a corpus entry (a real incident, a repository), from its name alone: "tune" (2/3) or "heldout"
    (1/3) by a hash, fixed before any result is seen, so that nobody can move an entry after looking at it.
    Detectors are changed only while looking at the tuning split; both splits are reported."""
    return "tune" if int(hashlib.sha256(name.encode()).hexdigest(), 16) % 3 != 0 else "heldout"
