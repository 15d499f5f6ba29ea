"""`AmpDoctorCallback` in a real HF Trainer: a tiny Llama (hidden 64, 2 layers, vocab 128) trained on CPU with bf16
autocast. Clean, it reports nothing; each injected fault is found where it was made."""

from __future__ import annotations

import json
import logging

import pytest
import torch

transformers = pytest.importorskip("transformers")  # a dev dependency: present in CI, so never skipped there

from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainerCallback, TrainingArguments  # noqa: E402

from ampdoctor.integrations.outcome import AmpDoctorError  # noqa: E402
from ampdoctor.integrations.transformers import AmpDoctorCallback  # noqa: E402


def tiny_llama() -> LlamaForCausalLM:
    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         vocab_size=128, max_position_embeddings=64)
    return LlamaForCausalLM(config)


def train(tmp_path, model, callbacks, steps=2, **arguments) -> Trainer:
    ids = torch.randint(0, 128, (2 * steps, 16), generator=torch.Generator().manual_seed(1))
    data = [{"input_ids": row, "labels": row} for row in ids]
    args = TrainingArguments(output_dir=str(tmp_path / "run"), bf16=True, use_cpu=True, report_to=[], max_steps=steps,
                             per_device_train_batch_size=2, logging_steps=1, save_strategy="no", disable_tqdm=True, **arguments)
    trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=callbacks)
    return trainer


class SeesLogs(TrainerCallback):
    """Stands for a logger (W&B, TensorBoard): the `logs` it was handed."""

    def __init__(self) -> None:
        self.logs: list[dict] = []

    def on_log(self, args, state, control, logs=None, **kwargs):
        self.logs.append(dict(logs or {}))


def ids(report) -> list[str]:
    return sorted({f.rule_id for f in report.findings})


def test_clean_run_reports_nothing_writes_json_and_logs_counts(tmp_path, caplog):
    logger_like = SeesLogs()
    doctor = AmpDoctorCallback(output_dir=tmp_path / "report")
    trainer = train(tmp_path, tiny_llama(), [logger_like, doctor])
    with caplog.at_level(logging.WARNING, logger="ampdoctor"):
        trainer.train()
    assert doctor.report is not None and doctor.report.findings == ()
    assert doctor.report.errors == ()
    assert doctor.report.checked == ("<TrainingArguments>", "model LlamaForCausalLM at rest",
                                     "first optimizer step of LlamaForCausalLM under the HF Trainer")
    written = json.loads((tmp_path / "report" / "ampdoctor-report.json").read_text())
    assert written["summary"]["total"] == 0 and written["info"]["policy"].startswith("params=fp32,compute=bf16")
    # A logger placed before the callback still received the counts, once.
    with_counts = [logs for logs in logger_like.logs if "ampdoctor/error" in logs]
    assert len(with_counts) == 1 and with_counts[0]["ampdoctor/error"] == 0.0 and "loss" in with_counts[0]
    assert "first optimizer step" in caplog.text and "no findings" in caplog.text
    assert trainer.state.global_step == 2


def test_bf16_inv_freq_is_found_at_rest_with_its_module_path(tmp_path):
    model = tiny_llama()
    rotary = model.model.rotary_emb
    rotary.inv_freq = rotary.inv_freq.to(torch.bfloat16)
    doctor = AmpDoctorCallback()
    train(tmp_path, model, [doctor], steps=1).train()
    found = [f for f in doctor.report.findings if f.rule_id == "AMP002"]
    assert [(f.location.module, f.location.label) for f in found] == [("model.rotary_emb", "inv_freq")]
    assert found[0].details["dtype"] == "bf16"


def test_grad_scaler_forced_on_is_found(tmp_path):
    doctor = AmpDoctorCallback()
    trainer = train(tmp_path, tiny_llama(), [doctor], steps=1)
    trainer.accelerator.scaler = torch.amp.GradScaler("cpu")  # what a trainer that builds a scaler for any half dtype does
    trainer.train()
    found = [f for f in doctor.report.findings if f.rule_id == "AMP004"]
    assert len(found) == 1 and "compute is bf16" in found[0].message
    assert found[0].location.op == "aten::_amp_foreach_non_finite_check_and_unscale_"


class RecastGrads(TrainerCallback):
    """Incident 3's `param.grad.data = param.grad.data.to(...)`, on the first layer's MLP before the step."""

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        for p in model.model.layers[0].mlp.parameters():
            p.grad.data = p.grad.data.to(torch.bfloat16)


def test_recast_gradients_are_found_with_their_parameters(tmp_path):
    doctor = AmpDoctorCallback()
    # SGD adds a bf16 gradient to an fp32 weight without complaint: the fault is silent, as incident 3 was on CPU.
    train(tmp_path, tiny_llama(), [RecastGrads(), doctor], steps=1, optim="sgd").train()
    found = [f for f in doctor.report.findings if f.rule_id == "AMP003"]
    assert len(found) == 1
    assert found[0].details["grad"] == "bf16" and found[0].details["param"] == "fp32"
    assert sorted(found[0].details["params"]) == [f"model.layers.0.mlp.{name}.weight" for name in ("down_proj", "gate_proj", "up_proj")]


def test_fail_on_stops_training_before_the_first_step(tmp_path):
    # fp16 autocast over a model pretrained in bf16 and known to overflow fp16 (Gemma, by its name) is a warning before
    # any step runs (AMP126).
    model = tiny_llama()
    model.config._name_or_path = "google/gemma-2-2b"
    doctor = AmpDoctorCallback(fail_on="warning")
    trainer = train(tmp_path, model, [doctor], steps=1)
    trainer.args.bf16, trainer.args.fp16 = False, True
    with pytest.raises(AmpDoctorError, match=r"(?s)stopped training \(on_train_begin.*AMP126"):
        trainer.train()
    assert trainer.state.global_step == 0
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    assert _get_current_dispatch_mode() is None


def test_fail_on_is_checked_when_built():
    with pytest.raises(ValueError, match="fail_on"):
        AmpDoctorCallback(fail_on="fatal")


def test_a_step_that_raises_writes_its_report_and_the_exception_goes_on(tmp_path):
    model = tiny_llama()

    def broken(module, args):
        raise ValueError("a shape the layer cannot take")

    model.model.layers[1].register_forward_pre_hook(broken)
    doctor = AmpDoctorCallback(output_dir=tmp_path / "report")
    trainer = train(tmp_path, model, [doctor], steps=1)
    with pytest.raises(ValueError, match="a shape the layer cannot take"):
        trainer.train()
    written = json.loads((tmp_path / "report" / "ampdoctor-report.json").read_text())
    assert written["info"]["script_failed"] is True and written["info"]["exception"] == "ValueError: a shape the layer cannot take"
    assert doctor.report.info.script_failed is True and "training_step" not in vars(trainer)
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    assert _get_current_dispatch_mode() is None  # the audit ended with the step
