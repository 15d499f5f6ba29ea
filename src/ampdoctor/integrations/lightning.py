"""Lightning: ``Trainer(callbacks=[AmpDoctor()])``.

- `setup` (stage ``fit``): the trainer's live `precision`, strategy, device count and accumulation are checked as
  the Lightning reader reads a LightningCLI config of them (the same rules `ampdoctor lint` asks).
- the first training step is audited from `on_train_batch_start` to `on_train_batch_end` (`ampdoctor.audit`,
  one optimizer step); `.grad` dtypes are read again in `on_after_backward` and `on_before_optimizer_step`
  (Lightning runs the forward and backward inside the optimizer's `step(closure)`); every hook is gone after.
- `callback.report` holds the `Report`; on global rank zero it is written to `output_dir` (JSON, and HTML where this
  ampdoctor renders it; default: the trainer's `default_root_dir`), summarised with `rank_zero_info`, and its
  counts logged through the LightningModule's `log_dict` (``ampdoctor/error``, ...) so every logger records them.
- `fail_on="error"` (or ``"warning"``) raises `AmpDoctorError` on every rank, which stops `fit`.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from lightning.pytorch.callbacks.callback import Callback
from lightning.pytorch.utilities.rank_zero import rank_zero_info
from typing_extensions import override

from ampdoctor.audit.evidence import When
from ampdoctor.frameworks import lightning as lightning_reader
from ampdoctor.frameworks.located import Document
from ampdoctor.integrations.outcome import (
    AmpDoctorError,
    FirstStep,
    check_fail_on,
    fail_severity,
    failed,
    metrics,
    summary,
    write_report_files,
)
from ampdoctor.policy import Policy
from ampdoctor.report import Report

TRAINER = "<lightning.Trainer>"

__all__ = ["AmpDoctor", "AmpDoctorError", "lint_trainer"]


def _strategy(trainer: Any) -> Any:
    strategy = trainer.strategy
    name = type(strategy).__name__
    if "deepspeed" not in name.lower():
        return name
    init: dict[str, Any] = {}
    stage = getattr(strategy, "config", {}).get("zero_optimization", {}).get("stage") if isinstance(getattr(strategy, "config", None), dict) else None
    if stage is not None:
        init["stage"] = stage
    return {"class_path": name, "init_args": init}


def lint_trainer(trainer: Any) -> Report:
    """Check a live Lightning Trainer's precision and strategy as `ampdoctor lint` checks a config that sets them."""
    from ampdoctor.lint.configs import lint_documents

    section = {"precision": str(trainer.precision), "strategy": _strategy(trainer), "devices": trainer.num_devices,
               "num_nodes": trainer.num_nodes, "accumulate_grad_batches": trainer.accumulate_grad_batches}
    return lint_documents([Document(TRAINER, "yaml", {"trainer": section}, {})], reader=lightning_reader.READER)


class AmpDoctor(Callback):
    r"""Check the trainer's precision and strategy in `setup`, audit the first training step, report on rank zero.

    Args:
        fail_on: ``"error"`` or ``"warning"`` stops `fit` with `AmpDoctorError` when a finding of at least that
            severity is found; ``None`` (default) only reports.
        output_dir: where ``ampdoctor-report.json`` is written (default: ``trainer.default_root_dir``).
        policy: the `Policy` (or its string) the step is judged against; by default, the policy it is seen to run.

    Example::

        >>> from lightning.pytorch import Trainer
        >>> from ampdoctor.integrations.lightning import AmpDoctor
        >>> trainer = Trainer(precision="bf16-mixed", callbacks=[AmpDoctor(fail_on="error")])
    """

    def __init__(self, fail_on: str | None = None, output_dir: str | Path | None = None, policy: Policy | str | None = None) -> None:
        self.fail_on = fail_severity(fail_on)
        self.output_dir = output_dir
        self.policy = policy
        self.report: Report | None = None
        self.written: list[Path] = []
        self._step = FirstStep()

    def _add(self, report: Report) -> None:
        self.report = report if self.report is None else self.report.merge(report)

    def _publish(self, trainer: Any, where: str, stop: bool = True) -> None:
        assert self.report is not None
        if trainer.is_global_zero:
            folder = self.output_dir if self.output_dir is not None else trainer.default_root_dir
            self.written = write_report_files(self.report, folder)
            rank_zero_info(f"ampdoctor ({where}):\n{summary(replace(self.report, tables=()))}"
                           + "".join(f"\nreport written to {p}" for p in self.written))
        if stop:
            check_fail_on(self.report, self.fail_on, where)

    @override
    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        if stage != "fit":
            return
        self._add(lint_trainer(trainer))
        self._publish(trainer, "setup: precision and strategy")

    @override
    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        self._step.begin(self.policy, pl_module, pl_module.device.type,
                         f"first training step of {type(pl_module).__name__} under Lightning")

    @override
    def on_after_backward(self, trainer: Any, pl_module: Any) -> None:
        self._step.snapshot_grads(When.AFTER_BACKWARD)

    @override
    def on_before_optimizer_step(self, trainer: Any, pl_module: Any, optimizer: Any) -> None:
        self._step.snapshot_grads(When.BEFORE_OPTIMIZER_STEP)

    @override
    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if not self._step.running:
            return
        self.close()
        assert self.report is not None
        # Logged from every rank with the same values; the loggers write on rank zero.
        pl_module.log_dict(metrics(self.report), on_step=True, on_epoch=False, batch_size=1)
        self._publish(trainer, "first training step")

    @override
    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        # A step that raised leaves the audit entered: end it, so the failure is diagnosed in `report`, and write that
        # report; Lightning then raises the exception on, unchanged.
        if not self._step.running or isinstance(exception, AmpDoctorError):
            return
        self.close(exception)
        assert self.report is not None
        self.report = failed(self.report, exception)
        self._publish(trainer, "first training step (failed)", stop=False)

    @override
    def teardown(self, trainer: Any, pl_module: Any, stage: str) -> None:
        self.close()

    def close(self, exception: BaseException | None = None) -> None:
        """End the audit if one is running (removes every hook and mode); its findings join `report`."""
        report = self._step.end(exception)
        if report is not None:
            self._add(report)
