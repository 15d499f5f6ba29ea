"""What `ampdoctor run` and `ampdoctor audit` do, as library functions the CLI calls."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from typing import Any, Sequence

from ampdoctor.audit import distributed
from ampdoctor.audit.observe import Observed
from ampdoctor.audit.rankfacts import RankFacts
from ampdoctor.audit.runner import RunResult, ScriptNotFound, run
from ampdoctor.audit.session import Audit
from ampdoctor.core import Severity
from ampdoctor.policy import Policy
from ampdoctor.report import ErrorKind, Report, ReportError, exit_code

MERGE_TIMEOUT_S = float(os.environ.get("AMPDOCTOR_MERGE_TIMEOUT", "60"))


@dataclass(frozen=True)
class CommandResult:
    report: Report | None  # the report this process writes (None: a non-zero rank, which sent its report to rank 0)
    exit_code: int


class _Termination:
    """SIGTERM while a rank runs: torchrun sends it to the surviving workers when one fails. The script is stopped
    with exit code 143 as the signal would, and the audit goes on to send (and on rank 0, merge and write) the
    report. The previous handler comes back when the command ends."""

    GRACE_S = 2.0  # after the signal, how long rank 0 still waits for the other survivors' last reports

    def __init__(self) -> None:
        self.at: float | None = None
        self.in_script = True
        self._previous: Any = None
        self._installed = False

    def __enter__(self) -> "_Termination":
        try:
            self._previous = signal.signal(signal.SIGTERM, self._handle)
            self._installed = True
        except ValueError:  # not the main thread: leave signals alone
            pass
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._installed:
            signal.signal(signal.SIGTERM, self._previous)

    def _handle(self, signum: int, frame: Any) -> None:
        if self.at is None:
            self.at = time.monotonic()
        # Raise only while the script's code is on the stack, where the runner catches its SystemExit. A signal
        # that lands after the script ended (say, while its exception is being recorded) must not cut the
        # report short: rank 0 exited 143 without writing it when torchrun's SIGTERM came in that window.
        if self.in_script and _inside_runpy(frame):
            self.in_script = False
            raise SystemExit(128 + signum)

    @property
    def ended_by(self) -> str | None:
        return "SIGTERM" if self.at is not None else None

    def expired(self) -> bool:
        return self.at is not None and time.monotonic() >= self.at + self.GRACE_S


def _inside_runpy(frame: Any) -> bool:
    """Whether runpy (running the script) sits between `frame` and the runner's own frame. `python -m ampdoctor`
    itself runs under runpy, so only the frames below `run` count."""
    seen_runpy = False
    while frame is not None:
        if frame.f_code is run.__code__:
            return seen_runpy
        name = frame.f_code.co_filename
        seen_runpy = seen_runpy or name == "<frozen runpy>" or name.endswith(f"{os.sep}runpy.py")
        frame = frame.f_back
    return False


def run_command(
    target: str,
    args: Sequence[str],
    *,
    module: bool,
    policy: Policy | None,
    max_steps: int | None,
    device_type: str | None,
    target_device: str | None,
    fail_on: Severity,
    output: str | None,
    verbose: bool = False,
    every: int | None = None,
) -> CommandResult:
    """Run and audit a script. Under torchrun every rank sends its report through the launcher's store and rank 0
    returns the merged one (see `ampdoctor.audit.distributed`); with `output`, each rank also writes
    `<output>.ranks/rankN.json`."""
    info = distributed.rank_info()
    if not info.distributed:
        result = run(target, args, module=module, policy=policy, max_steps=max_steps, device_type=device_type,
                     target_device=target_device, verbose=verbose, every=every)
        return CommandResult(result.report, exit_code(result.report, fail_on, program_code=result.exit_code))
    with _Termination() as term:
        return _run_rank(info, term, target, args, module=module, policy=policy, max_steps=max_steps, device_type=device_type,
                         target_device=target_device, fail_on=fail_on, output=output, verbose=verbose, every=every)


def _run_rank(info: distributed.RankInfo, term: _Termination, target: str, args: Sequence[str], *, fail_on: Severity,
              output: str | None, **kwargs: Any) -> CommandResult:
    exchange = distributed.Exchange(info, distributed.agent_store(info))
    exchange.announce()

    def send(report: Report, observed: Observed | None, final: bool) -> None:
        exchange.adopt_process_group_store()
        facts = observed.rank_facts() if observed is not None else RankFacts()
        sent = exchange.send(report, facts, final=final, ended_by=term.ended_by)
        if output:
            distributed.write_rank_file(sent, distributed.rank_dir(output))

    def on_stop(audit: Audit) -> None:
        # Recording stopped (max_steps recorded, or the script ended): send this rank's report now, in case the rank
        # dies later.
        send(audit.build_report(None), audit.observed, final=False)

    result: RunResult = run(target, args, on_stop=on_stop, **kwargs)
    term.in_script = False
    report = result.report.with_info(ended_by=term.ended_by) if term.ended_by else result.report
    send(report, result.observed, final=True)
    if info.rank != 0:
        return CommandResult(None, exit_code(report, fail_on, program_code=result.exit_code))
    if exchange.store is None:
        alone = report.merge(Report(errors=(ReportError("ranks", f"no store reachable to exchange reports with the other "
                                                        f"{info.world_size - 1} ranks: this is rank 0's report alone", fatal=False,
                                                        kind=ErrorKind.RANK),)))
        return CommandResult(alone, exit_code(alone, fail_on, program_code=result.exit_code))
    got = exchange.collect(MERGE_TIMEOUT_S, stop=term.expired)
    merged = distributed.merge_reports(got, info.world_size, host=exchange.host)
    if term.ended_by:
        merged = merged.with_info(ended_by=term.ended_by)
    return CommandResult(merged, exit_code(merged, fail_on, program_code=result.exit_code))


__all__ = ["CommandResult", "ScriptNotFound", "run_command"]
