"""`AmpDoctor` in a real Lightning Trainer on CPU: the precision/strategy check in `setup`, the first-step audit
(Lightning runs forward and backward inside `optimizer.step(closure)`), reports and `fail_on`."""

from __future__ import annotations

import json

import pytest
import torch

pl = pytest.importorskip("lightning.pytorch")  # a dev dependency: present in CI, so never skipped there

from ampdoctor.integrations.lightning import AmpDoctor  # noqa: E402
from ampdoctor.integrations.outcome import AmpDoctorError  # noqa: E402


class Regressor(pl.LightningModule):
    def __init__(self, table_dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
        self.net[0].register_buffer("inv_freq", torch.rand(4).to(table_dtype))  # a rotary table, for the fault case

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x).float(), y)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


def fit(tmp_path, doctor, precision, module=None) -> pl.Trainer:
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(8, 8), torch.randn(8, 1)), batch_size=4)
    trainer = pl.Trainer(accelerator="cpu", devices=1, precision=precision, max_steps=2, callbacks=[doctor], logger=False,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path)
    trainer.fit(module or Regressor(), data)
    return trainer


def test_bf16_mixed_is_clean_reported_and_logged(tmp_path):
    doctor = AmpDoctor()
    trainer = fit(tmp_path, doctor, "bf16-mixed")
    assert doctor.report.findings == () and doctor.report.errors == ()
    # The step ran inside optimizer.step(closure): its forward is still seen under bf16 autocast, its grads fp32.
    assert doctor.report.info["policy"].startswith("params=fp32,compute=bf16,output=bf16,grads=fp32")
    assert json.loads((tmp_path / "ampdoctor-report.json").read_text())["summary"]["total"] == 0
    assert float(trainer.callback_metrics["ampdoctor/error"]) == 0.0
    assert trainer.global_step == 2


def test_bf16_true_is_judged_in_setup_and_in_the_step(tmp_path):
    doctor = AmpDoctor(output_dir=tmp_path / "out")
    fit(tmp_path, doctor, "bf16-true")
    where = sorted((f.rule_id, f.location.file or f"module {f.location.module!r}") for f in doctor.report.findings if f.rule_id == "AMP119")
    assert where == [("AMP119", "<lightning.Trainer>"), ("AMP119", "module ''")]


def test_half_rotary_buffer_found_in_the_step_with_its_module(tmp_path):
    doctor = AmpDoctor()
    fit(tmp_path, doctor, "bf16-mixed", Regressor(table_dtype=torch.bfloat16))
    found = [f for f in doctor.report.findings if f.rule_id == "AMP002"]
    assert [(f.location.module, f.location.label) for f in found] == [("net.0", "inv_freq")]


def test_fail_on_warning_stops_fit_in_setup(tmp_path):
    doctor = AmpDoctor(fail_on="warning")
    with pytest.raises(AmpDoctorError, match=r"(?s)setup: precision and strategy.*AMP119"):
        fit(tmp_path, doctor, "bf16-true")
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    assert _get_current_dispatch_mode() is None


class OwnRotary(Regressor):
    """The rotary table is a buffer of the LightningModule itself, and `training_step` never calls `self(...)`."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("inv_freq", torch.rand(4).to(torch.bfloat16))

    def training_step(self, batch, batch_idx):
        x, y = batch
        angle = torch.outer(torch.arange(4).float(), self.inv_freq.float()).cos().sum()
        return torch.nn.functional.mse_loss(self.net(x).float(), y) + 0 * angle


def test_a_buffer_of_the_lightning_module_itself_is_scanned(tmp_path):
    doctor = AmpDoctor()
    fit(tmp_path, doctor, "bf16-mixed", OwnRotary())
    found = [f for f in doctor.report.findings if f.rule_id == "AMP002"]
    assert [(f.location.module, f.location.label) for f in found] == [("", "inv_freq")]


class Broken(Regressor):
    def training_step(self, batch, batch_idx):
        x, _ = batch
        return self.net(x)[:, 5].sum()  # one output column: index 5 is out of range


def test_a_step_that_raises_writes_its_report_and_the_exception_goes_on(tmp_path):
    doctor = AmpDoctor()
    with pytest.raises(IndexError):
        fit(tmp_path, doctor, "bf16-mixed", Broken())
    written = json.loads((tmp_path / "ampdoctor-report.json").read_text())
    assert written["info"]["script_failed"] is True and written["info"]["exception"].startswith("IndexError: index 5 is out of bounds")
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    assert _get_current_dispatch_mode() is None


def test_under_an_audit_that_already_records_the_process_the_step_is_left_to_it(tmp_path):
    # `ampdoctor run train.py` records the whole script; the callback's own audit of the step would be a second
    # recorder, which the first refuses: the callback leaves the step to it and still checks the setup.
    from ampdoctor.audit.session import Audit

    module = Regressor(table_dtype=torch.bfloat16)
    doctor = AmpDoctor()
    with Audit(None, model=module, device_type="cpu", max_steps=1) as outer:
        trainer = fit(tmp_path, doctor, "bf16-mixed", module)
    assert trainer.global_step == 2
    assert [f.rule_id for f in outer.report.findings if f.rule_id == "AMP002"] == ["AMP002"]
    assert "AMP002" not in {f.rule_id for f in doctor.report.findings}  # the step was not audited a second time
