"""Per-rank audits under torchrun, merged on rank 0.

Every rank sends its report as JSON (the report's own schema, plus the facts the cross-rank rules compare) through
the key-value store the launcher already runs and every node reaches: torchrun's agent store
(``TORCHELASTIC_USE_AGENT_STORE``: a `TCPStore` at ``MASTER_ADDR:MASTER_PORT``, on the rendezvous host), else the
default process group's store. A rank sends when recording stops (in case it dies later) and again when its script
ends. Rank 0 polls the store with a deadline, never a collective, so a dead or hung rank cannot hang it; what it
reads is parsed strictly as data (`report_from_dict`) and never executed. Nothing is read from a directory:
a file planted in a temp or output directory is never loaded. With ``--output``, each rank also leaves its own
report next to the merged one (``<output>.ranks/rankN.json``), created exclusively with private permissions.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

from ampdoctor.audit.rankfacts import RankFacts
from ampdoctor.core import Finding
from ampdoctor.core.catalog import finding_of
from ampdoctor.core.model import json_object
from ampdoctor.core.registry import detectors
from ampdoctor.report import ErrorKind, Report, ReportError, ReportInfo, report_from_dict, report_to_dict
from ampdoctor.report.info import RankCoverage

# How long a rank waits to reach the store before it reports alone.
CONNECT_TIMEOUT_S = 30.0
_ENVELOPE = ("rank", "final", "host", "pid", "ended_by", "report", "facts")


@dataclass(frozen=True)
class RankInfo:
    rank: int
    world_size: int
    restart: str = "0"

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def rank_info() -> RankInfo:
    env = os.environ
    rank = int(env.get("RANK", "0") or 0)
    world = int(env.get("WORLD_SIZE", "1") or 1)
    return RankInfo(rank, world, env.get("TORCHELASTIC_RESTART_COUNT", "0") or "0")


@dataclass(frozen=True)
class RankReport:
    """What one rank sent: its report, the facts the cross-rank rules compare, and how its run ended."""

    rank: int
    final: bool  # sent when the script ended (else when recording stopped: the rank may have died since)
    report: Report
    facts: RankFacts = field(default_factory=RankFacts)
    host: str = ""
    pid: int = 0
    ended_by: str | None = None  # "SIGTERM" when the launcher stopped it

    def to_json(self) -> str:
        return json.dumps({"rank": self.rank, "final": self.final, "host": self.host, "pid": self.pid, "ended_by": self.ended_by,
                           "report": report_to_dict(self.report), "facts": self.facts.to_dict()})

    @classmethod
    def from_json(cls, text: str | bytes) -> "RankReport":
        """Strict: a JSON document of exactly this shape, else ValueError. It is data; nothing in it runs."""
        try:
            data = json.loads(text)
        except (ValueError, UnicodeDecodeError) as err:
            raise ValueError(f"not JSON: {err}") from None
        d = json_object(data, _ENVELOPE, "rank report", _ENVELOPE)
        if type(d["rank"]) is not int or type(d["final"]) is not bool or type(d["pid"]) is not int or not isinstance(d["host"], str):
            raise ValueError("rank report: rank/pid must be integers, final a boolean, host a string")
        if d["ended_by"] is not None and not isinstance(d["ended_by"], str):
            raise ValueError("rank report: ended_by must be a string or null")
        return cls(d["rank"], d["final"], report_from_dict(d["report"]), RankFacts.from_dict(d["facts"]), d["host"], d["pid"], d["ended_by"])


# --- the store ------------------------------------------------------------------------------------


def _report_key(rank: int) -> str:
    return f"report/{rank}"


def _started_key(rank: int) -> str:
    return f"started/{rank}"


def agent_store(info: RankInfo, timeout: float = CONNECT_TIMEOUT_S) -> Any | None:
    """A client of torchrun's agent store (every worker of every node reaches it), or None outside torchrun."""
    env = os.environ
    if env.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() != "true" or not env.get("MASTER_ADDR") or not env.get("MASTER_PORT"):
        return None
    from datetime import timedelta

    import torch.distributed as dist

    try:
        store = dist.TCPStore(env["MASTER_ADDR"], int(env["MASTER_PORT"]), is_master=False, timeout=timedelta(seconds=timeout))
    except (RuntimeError, ValueError, OSError):
        return None
    return dist.PrefixStore(f"ampdoctor/audit/{info.restart}", store)


def process_group_store() -> Any | None:
    """The default process group's store, while one exists (a launcher other than torchrun)."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            from torch.distributed.distributed_c10d import _get_default_store

            return dist.PrefixStore("ampdoctor/audit", _get_default_store())
    except (ImportError, RuntimeError, ValueError):
        pass
    return None


class Exchange:
    """This rank's side of the report exchange. `store` may be None (no store reachable yet: a later
    `adopt_process_group_store` may find one); every store error is swallowed: the audit never takes the
    training job down, and a rank that cannot send is named by rank 0 as one that sent nothing."""

    def __init__(self, info: RankInfo, store: Any | None) -> None:
        self.info = info
        self.store = store
        self.host = socket.gethostname()

    def adopt_process_group_store(self) -> None:
        if self.store is None:
            self.store = process_group_store()
            if self.store is not None:
                self.announce()

    def announce(self) -> None:
        self._set(_started_key(self.info.rank), json.dumps({"host": self.host, "pid": os.getpid()}))

    def send(self, report: Report, facts: RankFacts, *, final: bool, ended_by: str | None = None) -> RankReport:
        sent = RankReport(self.info.rank, final, report, facts, self.host, os.getpid(), ended_by)
        self._set(_report_key(self.info.rank), sent.to_json())
        return sent

    def _set(self, key: str, value: str) -> None:
        if self.store is None:
            return
        try:
            self.store.set(key, value)
        except (RuntimeError, ValueError, OSError):
            pass

    def _get(self, key: str) -> bytes | None:
        try:
            if self.store.check([key]):
                return self.store.get(key)
        except (RuntimeError, ValueError, OSError):
            pass
        return None

    def collect(self, timeout: float, stop: Callable[[], bool] = lambda: False, poll: float = 0.1) -> "Collected":
        """Poll until every rank's final report arrived, `timeout` seconds passed, or `stop()` says so."""
        got = Collected()
        if self.store is None:
            return got
        deadline = time.monotonic() + timeout
        while True:
            for rank in range(self.info.world_size):
                self._poll_rank(rank, got)
            done = all(r in got.reports and got.reports[r].final for r in range(self.info.world_size))
            if done or time.monotonic() >= deadline or stop():
                return got
            time.sleep(poll)

    def _poll_rank(self, rank: int, got: "Collected") -> None:
        if rank in got.reports and got.reports[rank].final:
            return
        if rank not in got.started:
            raw = self._get(_started_key(rank))
            if raw is not None:
                try:
                    got.started[rank] = json_object(json.loads(raw), ("host", "pid"), "start", ("host", "pid"))
                except ValueError:
                    got.started[rank] = {}
        raw = self._get(_report_key(rank))
        if raw is None:
            return
        try:
            sent = RankReport.from_json(raw)
            if sent.rank != rank:
                raise ValueError(f"it says it is rank {sent.rank}")
        except ValueError as err:
            got.invalid[rank] = str(err)
            return
        got.invalid.pop(rank, None)
        got.reports[rank] = sent


@dataclass
class Collected:
    reports: dict[int, RankReport] = field(default_factory=dict)
    started: dict[int, dict] = field(default_factory=dict)  # rank -> {"host", "pid"} of ranks that began their audit
    invalid: dict[int, str] = field(default_factory=dict)  # rank -> why what it sent was rejected


# --- files next to --output -----------------------------------------------------------------------


def rank_dir(output: str) -> str:
    return f"{output}.ranks"


def write_rank_file(sent: RankReport, directory: str) -> str:
    """``<directory>/rank<N>.json``: a new file (O_EXCL, never following a planted link, mode 0600) renamed over
    the name; nothing ever reads these back."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    path = os.path.join(directory, f"rank{sent.rank}.json")
    tmp = f"{path}.{os.getpid()}.{time.monotonic_ns()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(sent.to_json())
    os.replace(tmp, path)
    return path


# --- the merge ------------------------------------------------------------------------------------


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _missing_error(rank: int, got: Collected, host: str) -> ReportError:
    """How a rank that sent no final report ended, as far as rank 0 can tell."""
    start = got.started.get(rank)
    if rank in got.invalid:
        return ReportError(f"rank {rank}", f"sent a report that was rejected and not used ({got.invalid[rank]})", fatal=False, kind=ErrorKind.RANK)
    if rank in got.reports:
        sent = got.reports[rank]
        return ReportError(f"rank {rank}", f"stopped after its audit but its script never ended (pid {sent.pid} on {sent.host}): "
                           "the process died or hung; this is the report sent when recording stopped", fatal=False, kind=ErrorKind.RANK)
    if start is None:
        return ReportError(f"rank {rank}", "sent no report: it never started its audit (the process died before, or never reached the store)", fatal=False, kind=ErrorKind.RANK)
    where = f"pid {start.get('pid')} on {start.get('host')}"
    gone = start.get("host") == host and isinstance(start.get("pid"), int) and not _pid_alive(start["pid"])
    how = "its process is gone: it was killed (a signal, the OOM killer) or crashed" if gone else "the process died or is still running"
    return ReportError(f"rank {rank}", f"sent no report: it died during its run before recording stopped ({where}; {how})", fatal=False, kind=ErrorKind.RANK)


def _ended_error(sent: RankReport) -> ReportError | None:
    code = sent.report.info.script_exit_code
    if sent.ended_by:
        return ReportError(f"rank {sent.rank}", f"was stopped by {sent.ended_by} (the launcher stops every worker when one fails)", fatal=False, kind=ErrorKind.RANK)
    if isinstance(code, int) and code != 0:
        exc = sent.report.info.exception
        return ReportError(f"rank {sent.rank}", f"its script exited with code {code}" + (f" ({exc})" if exc else ""), fatal=False, kind=ErrorKind.RANK)
    return None


def cross_rank_findings(facts: Mapping[int, RankFacts]) -> list[Finding]:
    """The ``ranks`` detectors of every rule over what the ranks reported."""
    out: list[Finding] = []
    for detector in detectors("ranks"):
        out.extend(finding_of(detector.rule_id, hit) for hit in detector.fn(facts))
    return out


def merge_reports(got: Collected, world_size: int, *, host: str = "") -> Report:
    """One report: identical findings from several ranks become one, with `details.ranks` (and `details.not_on_ranks`
    when some reporting ranks did not have it); cross-rank findings; the ranks that sent nothing, and how they ended."""
    merged: dict[tuple, tuple[Finding, list[int]]] = {}
    tables, checked, errors = [], [], []
    found = got.reports
    for rank in sorted(found):
        sent = found[rank]
        for f in sent.report.findings:
            key = (f.rule_id, f.message, str(f.location), str(f.origin))
            merged.setdefault(key, (f, []))[1].append(rank)
        tables.extend(replace(t, title=f"{t.title} — rank {rank}") for t in sent.report.tables if rank == 0)
        checked.extend(f"rank {rank}: {c}" for c in sent.report.checked)
        errors.extend(replace(e, file=f"rank {rank}: {e.file}") for e in sent.report.errors)
        ended = _ended_error(sent)
        if ended is not None:
            errors.append(ended)
    for rank in range(world_size):
        if rank not in found or not found[rank].final or rank in got.invalid:
            errors.append(_missing_error(rank, got, host))
    reported = sorted(found)
    findings = [replace(f, details={**dict(f.details), "ranks": ranks, **_not_on(ranks, reported)}) for f, ranks in merged.values()]
    findings += cross_rank_findings({r: found[r].facts for r in reported})
    missing = tuple(r for r in range(world_size) if r not in found or not found[r].final)
    ranks = RankCoverage(world_size, tuple(r for r in reported if found[r].final), missing)
    info = replace(found[min(found)].report.info if found else ReportInfo(), ranks=ranks)
    return Report.of(findings, tables=tuple(tables), checked=tuple(checked), errors=tuple(errors), info=info)


def _not_on(ranks: list[int], reported: list[int]) -> dict[str, Any]:
    """A finding some reporting ranks did not have: their code, data or set-up differ (an annotation, not a rule of its
    own: the finding's rule says what is wrong, this says where)."""
    absent = [r for r in reported if r not in ranks]
    return {"not_on_ranks": absent} if absent else {}
