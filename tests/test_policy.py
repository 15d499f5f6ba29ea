import json

import pytest
import torch

from ampdoctor import Policy, dtypes
from ampdoctor.facts import RunFacts
from ampdoctor.hardware import Bf16Support
from ampdoctor.policy import PRESETS


def names(findings):
    return sorted(f.name for f in findings)


def test_parse_fills_derived_defaults():
    p = Policy.parse("params=fp32, compute=bf16")
    assert p.output == "bf16"
    assert p.grads == "fp32"
    assert (p.grad_accum, p.reduce, p.optimizer_state) == ("fp32",) * 3
    assert p.loss_scale == "none"


def test_fields_are_names_and_torch_dtypes_come_from_properties():
    p = Policy.parse("params=fp32, compute=bf16")
    assert (p.param_dtype, p.compute_dtype, p.output_dtype, p.grad_dtype) == (torch.float32, torch.bfloat16, torch.bfloat16, torch.float32)
    assert (p.grad_accum_dtype, p.reduce_dtype, p.optimizer_state_dtype) == (torch.float32,) * 3
    # torch dtypes are accepted on the way in and stored as names
    assert Policy.derive(params=torch.float32, compute=torch.bfloat16) == p


def test_a_field_compares_equal_to_the_torch_dtype_it_names_never_silently_false():
    p = Policy.parse("params=fp32, compute=bf16")
    assert p.params == torch.float32 and torch.float32 == p.params and not (p.params != torch.float32)
    assert p.compute == torch.bfloat16 and p.compute != torch.float32 and p.compute != torch.float16
    assert p.params == "fp32" and p.params != "bf16"  # still the name
    assert {p.compute: 1}["bf16"] == 1 and json.dumps({"c": p.compute}) == '{"c": "bf16"}'
    assert p.params != torch.int32 and (p.params == 3) is False  # other types are not equal, not an error
    assert all(getattr(p, name) == getattr(p, attr) for name, attr in (("params", "param_dtype"), ("grads", "grad_dtype"),
                                                                       ("reduce", "reduce_dtype"), ("output", "output_dtype")))


def test_parse_accepts_short_keys_whitespace_and_aliases():
    p = Policy.parse("  p = float32 ,c=bfloat16,  o=f32 , reduce = fp32 ")
    assert (p.params, p.compute, p.output, p.reduce) == ("fp32", "bf16", "fp32", "fp32")


def test_fp16_compute_defaults_to_dynamic_loss_scaling():
    assert Policy.parse("c=half").loss_scale == "dynamic"


def test_fp64_params_widen_accumulation():
    p = Policy.parse("params=fp64")
    assert p.grad_accum == p.reduce == p.optimizer_state == "fp64"


@pytest.mark.parametrize("text", [str(p) for p in PRESETS.values()] + ["p=bf16,c=bf16,loss_scale=static", "params=fp16,grads=fp16,reduce=bf16"])
def test_str_round_trips(text):
    p = Policy.parse(text)
    assert Policy.parse(str(p)) == p


def test_canonical_string():
    assert str(Policy.preset("bf16-mixed")) == (
        "params=fp32,compute=bf16,output=bf16,grads=fp32,grad_accum=fp32,reduce=fp32,optimizer_state=fp32,loss_scale=none"
    )


@pytest.mark.parametrize(
    "text, token",
    [("params=fp32,computee=bf16", "computee"), ("params=fp8", "fp8"), ("params", "params"), ("c=bf16,loss_scale=sometimes", "sometimes"), ("p=fp32,p=bf16", "given twice"), ("c=", "c=")],
)
def test_parse_errors_name_the_offending_token(text, token):
    with pytest.raises(ValueError, match=token):
        Policy.parse(text)


def test_preset_names_and_lightning_aliases():
    assert Policy.preset("bf16-mixed") == Policy.parse("params=fp32,compute=bf16")
    assert Policy.preset("16-mixed") == Policy.preset("fp16-mixed")
    assert Policy.preset("32-true") == Policy.preset("fp32")
    assert Policy.parse("bf16-true").params == "bf16"
    assert Policy.preset("bf16-mixed").preset_name == "bf16-mixed"
    with pytest.raises(ValueError, match="unknown policy preset 'bf17'"):
        Policy.preset("bf17")


def test_fp16_mixed_preset_scales_and_bf16_mixed_does_not():
    assert Policy.preset("fp16-mixed").loss_scale == "dynamic"
    assert Policy.preset("bf16-mixed").loss_scale == "none"
    assert Policy.preset("fp16-true").params == "fp16"


def test_constructor_rejects_non_float_dtypes():
    with pytest.raises(ValueError, match="params=torch.int64"):
        Policy(params=torch.int64)


def test_dtype_names():
    assert dtypes.parse("torch.bfloat16") == "bf16"
    assert dtypes.to_torch("bf16") is torch.bfloat16
    assert dtypes.name_of(torch.float16) == "fp16"
    with pytest.raises(ValueError, match="'int8'"):
        dtypes.parse("int8")


def test_a_dtype_the_run_chooses_is_described_as_one_possibility_not_as_what_it_is():
    # AMP002/AMP118 on a value a config decides (`reduce_dtype=cfg.reduce_dtype`): "reduced in float32 or bfloat16"
    # stated as a fact what is a guess.
    assert dtypes.describe_half({"bf16"}) == "bfloat16"
    assert dtypes.describe_half({"bf16", "fp16"}) == "bfloat16 or float16"
    assert dtypes.describe_half({"fp32", "bf16", "fp16"}) == "bfloat16 or float16 where the run chooses it (else float32)"


@pytest.mark.parametrize("bad", [None, 3, ["bf16"]])
def test_parse_rejects_what_is_not_a_string_with_a_value_error(bad):
    with pytest.raises(ValueError, match="a policy is a string"):
        Policy.parse(bad)


def test_long_policy_text_is_not_echoed_whole():
    with pytest.raises(ValueError) as err:
        Policy.parse("p=" + "x" * 100_000)
    assert len(str(err.value)) < 300


def test_clean_presets_validate_clean():
    assert Policy.preset("fp32").validate() == []
    assert Policy.preset("bf16-mixed").validate() == []
    assert Policy.preset("fp16-mixed").validate() == []


def test_bf16_with_loss_scaling_is_grad_scaler_with_bf16():
    # fp32 weights: the scaler is pointless (a note); bf16 weights: unscale_ fails on CUDA (an error, incident 4)
    found = Policy.parse("params=fp32,compute=bf16,loss_scale=dynamic").validate()
    assert [(f.name, f.severity.value, f.rule_id) for f in found] == [("grad-scaler-with-bf16", "info", "AMP004")]
    found = Policy.parse("params=bf16,loss_scale=dynamic").validate()
    assert ("grad-scaler-with-bf16", "error") in [(f.name, f.severity.value) for f in found]


def test_fp16_without_scaling_warns():
    assert names(Policy.parse("c=fp16,loss_scale=none").validate()) == ["fp16-without-loss-scaling"]


def test_bf16_reduce_and_accumulation_warn():
    found = Policy.parse("c=bf16,reduce=bf16,grad_accum=bf16").validate()
    assert names(found) == ["bf16-grad-accumulation", "low-precision-reduce"]


def test_pure_bf16_hazards_are_notes_while_the_run_is_unknown():
    # Whether gradients are accumulated, reduced across ranks, or updated by a master-weight optimizer is not in a
    # Policy: with unknown facts these are info-level notes, never findings as if the facts were known. (The
    # optimizer state's precision is part of the pure-bf16 hazard when the weights are bf16 too.)
    found = Policy.preset("bf16-true").validate()
    assert names(found) == ["bf16-grad-accumulation", "low-precision-reduce", "pure-bf16-optimizer"]
    assert {f.severity.value for f in found} == {"info"}


def test_pure_bf16_hazards_with_known_facts():
    facts = RunFacts(grad_accum_steps=4, world_size=64, optimizer_kind="plain", autocast=False, trains=True)
    found = Policy.preset("bf16-true").validate(facts=facts)
    # bf16 accumulation of bf16 weights is the pure-bf16 design itself: a note
    assert [(f.name, f.severity.value) for f in found] == [
        ("bf16-grad-accumulation", "info"), ("low-precision-reduce", "warning"), ("pure-bf16-optimizer", "warning")]


def test_facts_that_rule_a_hazard_out():
    # one process, no accumulation, an optimizer with fp32 master weights (DeepSpeed's BF16_Optimizer)
    facts = RunFacts(grad_accum_steps=1, world_size=1, master_weights="optimizer", trains=True)
    assert Policy.preset("bf16-true").validate(facts=facts) == []
    # a run that does not train has no optimizer, gradient or reduce hazards
    assert Policy.preset("bf16-true").validate(facts=RunFacts(trains=False)) == []


def test_grads_in_other_dtype_than_params_is_incident_3():
    # SimpleTuner #854: bf16 weights, --gradient_precision=fp32
    found = Policy.parse("params=bf16,grads=fp32,grad_accum=fp32,reduce=fp32,optimizer_state=fp32").validate()
    assert "grad-dtype-mismatch" in names(found)


def test_scaler_on_fp16_grads():
    found = Policy.parse("params=fp16,loss_scale=dynamic").validate()
    assert "grad-scaler-with-fp16-params" in names(found)


def test_bf16_and_fp16_in_one_policy():
    assert "mixed-half-dtypes" in names(Policy.parse("params=fp16,compute=bf16").validate())


def test_device_without_native_bf16(monkeypatch):
    monkeypatch.setattr("ampdoctor.hardware.bf16_support", lambda d: Bf16Support("cuda:0 (Tesla T4)", False, "compute capability 7.5 < 8.0"))
    found = Policy.preset("bf16-mixed").validate(device="cuda")
    assert names(found) == ["bf16-unsupported-hardware"]
    assert "Tesla T4" in found[0].message


def test_device_check_only_when_bf16_is_used(monkeypatch):
    monkeypatch.setattr("ampdoctor.hardware.bf16_support", lambda d: Bf16Support("cpu", False, "no bf16"))
    assert Policy.preset("fp16-mixed").validate(device="cpu") == []


def test_autocast_uses_compute_dtype_on_cpu():
    lin = torch.nn.Linear(4, 4)
    with Policy.preset("bf16-mixed").autocast("cpu"):
        assert lin(torch.randn(2, 4)).dtype == torch.bfloat16


def test_autocast_disabled_for_fp32_compute_even_inside_ambient_autocast():
    lin = torch.nn.Linear(4, 4)
    with torch.autocast("cpu", dtype=torch.bfloat16), Policy.preset("fp32").autocast("cpu"):
        assert lin(torch.randn(2, 4)).dtype == torch.float32


def test_grad_scaler_only_for_fp16_with_scaling():
    assert Policy.preset("bf16-mixed").grad_scaler("cpu") is None
    assert Policy.preset("fp32").grad_scaler("cpu") is None
    assert Policy.preset("fp16-true").grad_scaler("cpu") is None
    scaler = Policy.preset("fp16-mixed").grad_scaler("cpu")
    assert isinstance(scaler, torch.amp.GradScaler) and scaler.is_enabled()


def test_static_loss_scale_never_grows():
    scaler = Policy.parse("c=fp16,loss_scale=static").grad_scaler("cpu")
    assert scaler.get_growth_interval() == 2**31 - 1
