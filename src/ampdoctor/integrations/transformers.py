"""HF transformers: ``Trainer(..., callbacks=[AmpDoctorCallback()])``.

- `on_train_begin`: the live `TrainingArguments` are linted as the HF Trainer reader reads an arguments file (the
  DeepSpeed config they point at followed, as `ampdoctor lint` follows it), with the model's own dtype, name and
  adapters filled in; the model is inspected at rest (`ampdoctor.inspect_model`: half rotary tables, `inv_freq`).
- the first optimizer step is audited from `on_step_begin` to `on_step_end` (`ampdoctor.audit`, one step), with
  the `.grad` dtypes read again in `on_pre_optimizer_step` (for optimizers torch's step hooks do not see); every
  hook is gone after `on_step_end`.
- `callback.report` holds the `Report`. On the main process the report is written to `output_dir` (JSON, and HTML
  where this ampdoctor renders it), summarised in the log, and its counts go through `on_log` to the loggers
  (W&B, TensorBoard) as ``ampdoctor/error``, ``ampdoctor/warning``, ``ampdoctor/info``.
- `fail_on="error"` (or ``"warning"``) raises `AmpDoctorError`, which stops training with the findings in its message.

- a step that raises inside the Trainer's `training_step` (forward, loss, backward) ends the audit there: the
  report, which says the step failed and diagnoses why, is written and logged, and the exception goes on unchanged
  (the Trainer calls no callback on failure, so the callback wraps that one method of the Trainer while it audits).
"""

from __future__ import annotations

import logging
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from ampdoctor import dtypes
from ampdoctor.audit.evidence import When
from ampdoctor.frameworks import hf
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

logger = logging.getLogger("ampdoctor")

ARGUMENTS = "<TrainingArguments>"

__all__ = ["AmpDoctorCallback", "AmpDoctorError", "lint_training_arguments"]


def _model_dtype(model: Any) -> str | None:
    trainable = [p for p in model.parameters() if p.requires_grad and p.is_floating_point()] if model is not None else []
    frozen = [p for p in model.parameters() if not p.requires_grad and p.is_floating_point()] if model is not None else []
    weights = frozen or trainable  # with adapters, the base model's dtype is the one it was loaded in
    return dtypes.name_of(weights[0].dtype) if weights else None


def _arguments_data(args: Any, model: Any) -> dict[str, Any]:
    """The arguments as the HF reader reads a file of them, completed with what only the live objects know."""
    data = {k: v for k, v in args.to_dict().items() if not k.startswith("_")}
    data["do_train"] = True  # `train()` was called: whatever do_train says, an optimizer steps
    deepspeed = getattr(args, "deepspeed", None)
    if deepspeed:
        data["deepspeed"] = deepspeed if isinstance(deepspeed, (str, dict)) else str(deepspeed)
    dtype = _model_dtype(model)
    if dtype is not None:
        data["torch_dtype"] = dtype
    config = getattr(model, "config", None)
    name = getattr(config, "_name_or_path", None) or getattr(config, "name_or_path", None)
    if isinstance(name, str) and name:
        data["model_name_or_path"] = name
    attn = getattr(config, "_attn_implementation", None)
    if isinstance(attn, str):
        data["attn_implementation"] = attn
    if getattr(model, "peft_config", None):
        data["use_peft"] = True
    return data


def lint_training_arguments(args: Any, model: Any = None) -> Report:
    """Lint live `TrainingArguments` (and the DeepSpeed config they name) as `ampdoctor lint` lints a file of them."""
    from ampdoctor.lint.configs import lint_documents

    return lint_documents([Document(ARGUMENTS, "json", _arguments_data(args, model), {})], reader=hf.READER)


def _unique(report: Report) -> Report:
    """One finding per rule and place: a table seen at rest and again in the step is one finding."""
    seen: set[tuple[str, str]] = set()
    kept = []
    for f in report.findings:
        key = (f.rule_id, str(f.location))
        if key not in seen:
            seen.add(key)
            kept.append(f)
    return replace(report, findings=tuple(kept))


def _run_before_loggers(callback: TrainerCallback, caller: Any) -> None:
    """Move `callback` to the front of the Trainer's callback list. The Trainer puts the reporting integrations
    (W&B, TensorBoard...) before the user's callbacks and hands every callback the same `logs` dict in list order:
    only a callback that runs before them can add the counts they log. The list belongs to the `CallbackHandler`
    calling this event, which passes no reference to itself, so it is taken from the calling frame."""
    from transformers.trainer_callback import CallbackHandler

    handler = caller.f_locals.get("self") if caller is not None else None
    if isinstance(handler, CallbackHandler) and callback in handler.callbacks:
        handler.callbacks.remove(callback)
        handler.callbacks.insert(0, callback)


class AmpDoctorCallback(TrainerCallback):
    """Lint the run at `on_train_begin`, audit its first optimizer step, report, and (with `fail_on`) stop it."""

    def __init__(self, fail_on: str | None = None, output_dir: str | Path | None = None, policy: Policy | str | None = None) -> None:
        self.fail_on = fail_severity(fail_on)
        self.output_dir = output_dir
        self.policy = policy
        self.report: Report | None = None
        self.written: list[Path] = []
        self._step = FirstStep()
        self._unlogged = False
        self._guarded: Any = None  # the Trainer whose training_step is wrapped while the step is audited

    # --- the report ------------------------------------------------------------------------------

    def _add(self, report: Report) -> None:
        self.report = _unique(report if self.report is None else self.report.merge(report))

    def _publish(self, args: Any, state: Any, where: str, stop: bool = True) -> None:
        """Write and log on the main process, then stop training if `fail_on` says so (on every process)."""
        assert self.report is not None
        if state.is_world_process_zero:
            folder = self.output_dir if self.output_dir is not None else args.output_dir
            if folder:
                self.written = write_report_files(self.report, folder)
            logger.warning("ampdoctor (%s):\n%s%s", where, summary(replace(self.report, tables=())),
                           "".join(f"\nreport written to {p}" for p in self.written))
            self._unlogged = True
        if stop:
            check_fail_on(self.report, self.fail_on, where)

    # --- Trainer events ------------------------------------------------------------------------

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        from ampdoctor.audit.session import inspect_model

        _run_before_loggers(self, sys._getframe(1))

        report = lint_training_arguments(args, model)
        if model is not None:
            report = report.merge(inspect_model(model, self.policy, device_type=args.device.type))
        self._add(report)
        self._publish(args, state, "on_train_begin: arguments and model")

    def on_step_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        if self._step.begin(self.policy, model, args.device.type,
                            f"first optimizer step of {type(model).__name__} under the HF Trainer"):
            self._guard(_trainer_of(sys._getframe(1)), args, state)

    def _guard(self, trainer: Any, args: Any, state: Any) -> None:
        """While the step is audited, a `training_step` that raises ends the audit with the failure diagnosed and the
        report written; the exception then goes on to the Trainer's caller unchanged."""
        if trainer is None or "training_step" in vars(trainer):
            return
        original = trainer.training_step
        callback = self

        def training_step(*a: Any, **k: Any) -> Any:
            try:
                return original(*a, **k)
            except Exception as exc:
                callback._unguard()
                callback.close(exc)
                assert callback.report is not None
                callback.report = failed(callback.report, exc)
                callback._publish(args, state, "first optimizer step (failed)", stop=False)
                raise

        trainer.training_step = training_step
        self._guarded = trainer

    def _unguard(self) -> None:
        trainer, self._guarded = self._guarded, None
        if trainer is not None:
            vars(trainer).pop("training_step", None)

    def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        # Optimizers outside torch.optim's step hooks (DeepSpeed's) are seen here only.
        self._step.snapshot_grads(When.BEFORE_OPTIMIZER_STEP)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not self._step.running:
            return
        self.close()
        self._publish(args, state, "first optimizer step")

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        # Loggers (W&B, TensorBoard) run after this callback on the same `logs`: the counts ride along once.
        if self._unlogged and self.report is not None and logs is not None:
            logs.update(metrics(self.report))
            self._unlogged = False

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.close()

    def close(self, exception: BaseException | None = None) -> None:
        """End the audit if one is running (removes every hook and mode); its findings join `report`."""
        self._unguard()
        report = self._step.end(exception)
        if report is not None:
            self._add(report)


def _trainer_of(frame: Any) -> Any:
    """The Trainer whose loop called this event: the `self` of a calling frame (the `CallbackHandler` keeps no
    reference to it)."""
    from transformers import Trainer

    for _ in range(4):
        if frame is None:
            return None
        owner = frame.f_locals.get("self")
        if isinstance(owner, Trainer):
            return owner
        frame = frame.f_back
    return None


