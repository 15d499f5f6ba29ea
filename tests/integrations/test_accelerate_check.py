"""`check(accelerator)` and `audit_step(...)` on a live CPU `Accelerator`."""

from __future__ import annotations

import json

import pytest
import torch

accelerate = pytest.importorskip("accelerate")  # installed with transformers' Trainer in the dev extras: never skipped in CI

from accelerate import Accelerator  # noqa: E402
from accelerate.state import AcceleratorState  # noqa: E402

from ampdoctor.integrations.accelerate import audit_step, check  # noqa: E402


@pytest.fixture
def accelerator():
    AcceleratorState._reset_state(reset_partial_state=True)
    yield Accelerator(cpu=True, mixed_precision="bf16")
    AcceleratorState._reset_state(reset_partial_state=True)


def one_step(accelerator):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    model, optimizer = accelerator.prepare(model, torch.optim.AdamW(model.parameters()))
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    return audit_step(accelerator, model, (x,), optimizer, loss_fn=lambda out, batch: torch.nn.functional.mse_loss(out.float(), y))


def test_bf16_accelerator_is_clean_and_its_step_runs_bf16_autocast(accelerator):
    assert check(accelerator).findings == ()
    report, loss = one_step(accelerator)
    assert report.findings == () and loss.dtype == torch.float32
    assert report.info["policy"].startswith("params=fp32,compute=bf16,output=bf16,grads=fp32")
    assert report.checked == ("<accelerate.Accelerator>", "one step of Sequential through accelerate")


def test_a_scaler_held_under_bf16_is_found_by_check_and_by_the_step(accelerator):
    accelerator.scaler = torch.amp.GradScaler("cpu")
    [at_setup] = check(accelerator).findings
    assert (at_setup.rule_id, at_setup.location.file, at_setup.location.label) == (
        "AMP004", "<accelerate.Accelerator>", "accelerator.scaler is a GradScaler")
    report, _ = one_step(accelerator)
    in_step = [f for f in report.findings if f.rule_id == "AMP004" and f.location.op]
    assert [f.location.op for f in in_step] == ["aten::_amp_foreach_non_finite_check_and_unscale_"]


def test_a_step_that_raises_writes_its_report_and_the_exception_goes_on(accelerator, tmp_path):
    model, optimizer = accelerator.prepare(torch.nn.Linear(8, 1), torch.optim.AdamW(torch.nn.Linear(8, 1).parameters()))
    with pytest.raises(IndexError) as raised:
        audit_step(accelerator, model, (torch.randn(4, 8),), optimizer, loss_fn=lambda out, batch: out[:, 5].sum(), output_dir=tmp_path)
    report = raised.value.ampdoctor_report
    assert report.info.script_failed is True and report.info.exception.startswith("IndexError: index 5 is out of bounds")
    assert json.loads((tmp_path / "ampdoctor-report.json").read_text())["info"]["script_failed"] is True
