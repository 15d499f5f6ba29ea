"""Per-rank audits under torchrun: every rank writes its own report file as soon as it has one
(when recording stops, and again when the script ends); rank 0 waits a bounded time for the
others and writes the merged report. Nothing here uses collectives, so a dead rank cannot hang it."""

from __future__ import annotations

import glob
import os
import pickle
import tempfile
import time
from dataclasses import dataclass, replace

from ampdoctor.report import Report, ReportError
from ampdoctor.rules import Finding


@dataclass(frozen=True)
class RankInfo:
    rank: int
    world_size: int
    run_id: str

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def rank_info() -> RankInfo:
    env = os.environ
    rank = int(env.get("RANK", "0") or 0)
    world = int(env.get("WORLD_SIZE", "1") or 1)
    run_id = "-".join(env.get(k, "") for k in ("TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT"))
    return RankInfo(rank, world, run_id.replace("/", "_"))


def rank_dir(output: str | None, info: RankInfo) -> str:
    if output:
        return f"{output}.ranks"
    return os.path.join(tempfile.gettempdir(), f"ampdoctor-audit-{info.run_id}")


def write_rank_report(report: Report, directory: str, rank: int, *, final: bool) -> str:
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"rank{rank}.pkl")
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as fh:
        pickle.dump({"rank": rank, "final": final, "report": report}, fh)
    os.replace(tmp, path)
    return path


def _read(path: str) -> dict | None:
    try:
        with open(path, "rb") as fh:
            return pickle.load(fh)
    except (OSError, EOFError, pickle.UnpicklingError):
        return None


def collect_rank_reports(directory: str, world_size: int, timeout: float) -> dict[int, dict]:
    """Wait until every rank has written a final report or `timeout` seconds passed."""
    deadline = time.monotonic() + timeout
    while True:
        found = {}
        for path in glob.glob(os.path.join(directory, "rank*.pkl")):
            data = _read(path)
            if data is not None:
                found[data["rank"]] = data
        if (len(found) >= world_size and all(d["final"] for d in found.values())) or time.monotonic() >= deadline:
            return found
        time.sleep(0.2)


def merge_reports(found: dict[int, dict], world_size: int) -> Report:
    """One report: identical findings from several ranks become one, with `details.ranks`."""
    merged: dict[tuple, tuple[Finding, list[int]]] = {}
    tables, checked, errors = [], [], []
    for rank in sorted(found):
        data = found[rank]
        report: Report = data["report"]
        for f in report.findings:
            key = (f.rule_id, f.message, str(f.location), str(f.origin))
            if key in merged:
                merged[key][1].append(rank)
            else:
                merged[key] = (f, [rank])
        tables.extend(replace(t, title=f"{t.title} — rank {rank}") for t in report.tables if rank == 0)
        checked.extend(f"rank {rank}: {c}" for c in report.checked)
        errors.extend(replace(e, file=f"rank {rank}: {e.file}") for e in report.errors)
        if not data["final"]:
            errors.append(ReportError(f"rank {rank}", "the script did not finish; this is the report written when recording stopped", fatal=False))
    for rank in range(world_size):
        if rank not in found:
            errors.append(ReportError(f"rank {rank}", "wrote no report (the process died or is still running)", fatal=False))
    findings = [replace(f, details={**dict(f.details), "ranks": ranks}) for f, ranks in merged.values()]
    info = dict(found[min(found)]["report"].info) if found else {}
    return Report.of(findings, tables=tuple(tables), checked=tuple(checked), errors=tuple(errors), info=info)
