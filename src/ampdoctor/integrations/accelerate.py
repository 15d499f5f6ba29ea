"""HF accelerate: ``ampdoctor.integrations.accelerate.check(accelerator)`` and ``audit_step(accelerator, ...)``.

`check` reads the live `Accelerator` as the accelerate reader reads an ``accelerate config`` file (mixed precision,
distributed type, process count, the DeepSpeed plugin's ZeRO stage and accumulation), adds what only the running
object knows (a GradScaler it holds, the DeepSpeed plugin's own config) and asks the same rules `ampdoctor lint`
asks. `audit_step` runs one training step through the accelerator under `ampdoctor.audit` and returns both.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable

from ampdoctor.core.model import Location
from ampdoctor.frameworks import accelerate as accelerate_reader
from ampdoctor.frameworks import deepspeed as deepspeed_reader
from ampdoctor.frameworks.located import Document
from ampdoctor.integrations.outcome import failed, write_report_files
from ampdoctor.policy import Policy
from ampdoctor.report import Report

ACCELERATOR = "<accelerate.Accelerator>"
DEEPSPEED_PLUGIN = "<accelerate.Accelerator.deepspeed_plugin>"

__all__ = ["audit_step", "check"]


def _accelerator_data(accelerator: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"compute_environment": "LOCAL_MACHINE", "distributed_type": str(accelerator.distributed_type.value),
                            "mixed_precision": str(accelerator.mixed_precision), "num_processes": int(accelerator.num_processes)}
    plugin = getattr(accelerator.state, "deepspeed_plugin", None)
    if plugin is not None:
        data["deepspeed_config"] = {"zero_stage": getattr(plugin, "zero_stage", None),
                                    "gradient_accumulation_steps": getattr(plugin, "gradient_accumulation_steps", None)}
    return data


def check(accelerator: Any) -> Report:
    """The precision rules over what `accelerator` is set up to run."""
    from ampdoctor.lint.configs import lint_readings, read_documents

    readings, checked, errors = read_documents([Document(ACCELERATOR, "yaml", _accelerator_data(accelerator), {})], reader=accelerate_reader.READER)
    plugin = getattr(accelerator.state, "deepspeed_plugin", None)
    live_ds = getattr(plugin, "deepspeed_config", None) if plugin is not None else None
    if isinstance(live_ds, dict):
        more, more_checked, more_errors = read_documents([Document(DEEPSPEED_PLUGIN, "json", live_ds, {})], reader=deepspeed_reader.READER)
        readings, checked, errors = readings + more, checked + more_checked, errors + more_errors
    scaler = getattr(accelerator, "scaler", None)
    for reading in readings:
        if scaler is not None and reading.policy is not None and reading.policy.loss_scale == "none":
            # A GradScaler the accelerator holds scales every backward, whatever mixed_precision says.
            here = Location(file=ACCELERATOR, label=f"accelerator.scaler is a {type(scaler).__name__}")
            reading.policy = dataclasses.replace(reading.policy, loss_scale="dynamic")
            reading.sources["loss_scale"] = here
            reading.set("loss_scaler_reason", "accelerator.scaler is set", here)
    return lint_readings(readings, checked, errors)


def audit_step(
    accelerator: Any,
    model: Any,
    batch: Any,
    optimizer: Any,
    loss_fn: Callable[[Any, Any], Any] | None = None,
    policy: Policy | str | None = None,
    output_dir: str | Path | None = None,
) -> tuple[Report, Any]:
    """One step through `accelerator` (prepared `model` and `optimizer`: forward, loss, ``accelerator.backward``,
    step, zero_grad) under `ampdoctor.audit`; returns `check(accelerator)` merged with the step's report, and the loss,
    and with `output_dir` writes it there (on the main process). A step that raises is diagnosed: its report says the
    step failed, is written, and rides on the exception (``err.ampdoctor_report``), which goes on unchanged."""
    from ampdoctor.audit.session import Audit, _default_loss

    audit = Audit(policy, model=accelerator.unwrap_model(model), device_type=accelerator.device.type, max_steps=1,
                  checked=(f"one step of {type(accelerator.unwrap_model(model)).__name__} through accelerate",))
    try:
        with audit:
            output = model(**batch) if isinstance(batch, dict) else model(*batch) if isinstance(batch, (list, tuple)) else model(batch)
            loss = (loss_fn or _default_loss)(output, batch)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    except Exception as exc:
        report = failed(check(accelerator).merge(audit.report), exc)
        exc.ampdoctor_report = report  # type: ignore[attr-defined]
        _write(accelerator, report, output_dir)
        raise
    report = check(accelerator).merge(audit.report)
    _write(accelerator, report, output_dir)
    return report, loss


def _write(accelerator: Any, report: Report, output_dir: str | Path | None) -> None:
    if output_dir is not None and getattr(accelerator, "is_main_process", True):
        write_report_files(report, output_dir)
