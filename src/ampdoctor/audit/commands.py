"""What `ampdoctor run` and `ampdoctor audit` do, as library functions the CLI calls."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Sequence

from ampdoctor.audit import distributed
from ampdoctor.audit.runner import RunResult, ScriptNotFound, run
from ampdoctor.policy import Policy
from ampdoctor.report import Report, exit_code
from ampdoctor.rules import Severity

MERGE_TIMEOUT_S = float(os.environ.get("AMPDOCTOR_MERGE_TIMEOUT", "60"))


@dataclass(frozen=True)
class CommandResult:
    report: Report | None  # the report this process writes (None: a non-zero rank, which wrote its own file)
    exit_code: int


def run_command(
    target: str,
    args: Sequence[str],
    *,
    module: bool,
    policy: Policy | None,
    max_steps: int,
    device_type: str | None,
    target_device: str | None,
    fail_on: Severity,
    output: str | None,
) -> CommandResult:
    """Run and audit a script; under torchrun each rank writes `<output>.ranks/rankN.pkl` and rank 0
    returns the merged report."""
    info = distributed.rank_info()
    directory = distributed.rank_dir(output, info) if info.distributed else None

    def on_stop(audit: object) -> None:
        # Recording stopped after max_steps: write this rank's report now, in case the rank dies later.
        if directory is not None:
            distributed.write_rank_report(audit.build_report(None), directory, info.rank, final=False)  # type: ignore[attr-defined]

    result: RunResult = run(target, args, module=module, policy=policy, max_steps=max_steps, device_type=device_type,
                            target_device=target_device, on_stop=on_stop if info.distributed else None)
    if directory is None:
        return CommandResult(result.report, exit_code(result.report, fail_on, program_code=result.exit_code))
    distributed.write_rank_report(result.report, directory, info.rank, final=True)
    if info.rank != 0:
        return CommandResult(None, exit_code(result.report, fail_on, program_code=result.exit_code))
    found = distributed.collect_rank_reports(directory, info.world_size, MERGE_TIMEOUT_S)
    merged = distributed.merge_reports(found, info.world_size)
    return CommandResult(merged, exit_code(merged, fail_on, program_code=result.exit_code))


__all__ = ["CommandResult", "ScriptNotFound", "run_command"]
