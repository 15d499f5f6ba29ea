import pytest
import torch

from ampdoctor import Policy
from ampdoctor.hardware import Bf16Support
from ampdoctor.policy import PRESETS, dtype_name, parse_dtype


def names(findings):
    return sorted(f.name for f in findings)


def test_parse_fills_derived_defaults():
    p = Policy.parse("params=fp32, compute=bf16")
    assert p.output == torch.bfloat16
    assert p.grads == torch.float32
    assert (p.grad_accum, p.reduce, p.optimizer_state) == (torch.float32,) * 3
    assert p.loss_scale == "none"


def test_parse_accepts_short_keys_whitespace_and_aliases():
    p = Policy.parse("  p = float32 ,c=bfloat16,  o=f32 , reduce = fp32 ")
    assert (p.params, p.compute, p.output, p.reduce) == (torch.float32, torch.bfloat16, torch.float32, torch.float32)


def test_fp16_compute_defaults_to_dynamic_loss_scaling():
    assert Policy.parse("c=half").loss_scale == "dynamic"


def test_fp64_params_widen_accumulation():
    p = Policy.parse("params=fp64")
    assert p.grad_accum == p.reduce == p.optimizer_state == torch.float64


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
    assert Policy.parse("bf16-true").params == torch.bfloat16
    assert Policy.preset("bf16-mixed").preset_name == "bf16-mixed"
    with pytest.raises(ValueError, match="unknown policy preset 'bf17'"):
        Policy.preset("bf17")


def test_fp16_mixed_preset_scales_and_bf16_mixed_does_not():
    assert Policy.preset("fp16-mixed").loss_scale == "dynamic"
    assert Policy.preset("bf16-mixed").loss_scale == "none"
    assert Policy.preset("fp16-true").params == torch.float16


def test_constructor_rejects_non_float_dtypes():
    with pytest.raises(ValueError, match="params=torch.int64"):
        Policy(params=torch.int64)


def test_dtype_names():
    assert parse_dtype("torch.bfloat16") is torch.bfloat16
    assert dtype_name(torch.float16) == "fp16"
    with pytest.raises(ValueError, match="'int8'"):
        parse_dtype("int8")


def test_clean_presets_validate_clean():
    assert Policy.preset("fp32").validate() == []
    assert Policy.preset("bf16-mixed").validate() == []
    assert Policy.preset("fp16-mixed").validate() == []


def test_bf16_with_loss_scaling_is_grad_scaler_with_bf16():
    found = Policy.parse("params=fp32,compute=bf16,loss_scale=dynamic").validate()
    assert names(found) == ["grad-scaler-with-bf16"]
    assert found[0].severity.value == "error"
    assert found[0].rule_id == "AMP004"


def test_fp16_without_scaling_warns():
    assert names(Policy.parse("c=fp16,loss_scale=none").validate()) == ["fp16-without-loss-scaling"]


def test_bf16_reduce_and_accumulation_warn():
    found = Policy.parse("c=bf16,reduce=bf16,grad_accum=bf16").validate()
    assert names(found) == ["bf16-grad-accumulation", "low-precision-reduce"]


def test_pure_bf16_hazards():
    assert names(Policy.preset("bf16-true").validate()) == [
        "bf16-grad-accumulation", "low-precision-optimizer-state", "low-precision-reduce", "pure-bf16-optimizer",
    ]


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
