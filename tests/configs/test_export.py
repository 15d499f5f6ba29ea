"""Policy -> framework config -> back: the same policy where the framework can express it, and a clean lint."""

import json

import pytest
import torch
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from ampdoctor.cli import main
from ampdoctor.core import Severity
from ampdoctor.frameworks import TARGETS, export, from_config
from ampdoctor.lint.configs import lint_config_files
from ampdoctor.policy import PRESETS, Policy

# What each framework can run exactly (the rest must be listed as "cannot express").
EXPRESSIBLE = {
    "deepspeed": {"fp32", "bf16-mixed", "bf16-true", "fp16-mixed"},
    "neox": {"fp32", "bf16-mixed", "bf16-true", "fp16-mixed"},
    "accelerate": {"fp32", "bf16-mixed", "fp16-mixed"},
    "hf": {"fp32", "bf16-mixed", "fp16-mixed", "bf16-true", "fp16-true"},
    "lightning": {"fp32", "bf16-mixed", "fp16-mixed", "bf16-true", "fp16-true"},
    "torchtune": {"fp32", "bf16-true"},
    "torchtitan": {"fp32", "bf16-mixed"},
}


@pytest.mark.parametrize("target", sorted(EXPRESSIBLE))
@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_export_then_read_back(target, preset):
    policy = PRESETS[preset]
    result = export(policy, target)
    policy_notes = [n for n in result.cannot_express if not n.startswith("rotary tables")]
    assert (policy_notes == []) == (preset in EXPRESSIBLE[target]), result.cannot_express
    if not policy_notes:
        assert from_config(target, result.config) == policy


def test_fsdp_export_is_an_fsdp2_policy():
    mp = export(Policy.preset("bf16-mixed"), "fsdp").config
    assert type(mp).__name__ == "MixedPrecisionPolicy"
    assert (mp.param_dtype, mp.reduce_dtype, mp.output_dtype) == (torch.bfloat16, torch.float32, torch.bfloat16)
    assert from_config("fsdp", mp) == Policy.preset("bf16-mixed")


def test_lightning_cannot_keep_fp32_reduce_under_bf16_true():
    policy = Policy.parse("params=bf16, reduce=fp32, grad_accum=bf16, optimizer_state=bf16")
    notes = export(policy, "lightning").cannot_express
    assert any(n.startswith("reduce=fp32") and "FSDP" in n for n in notes)


_FILE = {"deepspeed": "ds_config.json", "hf": "training_args.json", "accelerate": "accelerate_config.yaml",
         "lightning": "config.yaml", "neox": "model.yml"}


@pytest.mark.parametrize("target", sorted(_FILE))
def test_exported_clean_policies_lint_without_warnings(tmp_path, target):
    for preset in ("fp32", "bf16-mixed"):
        result = export(PRESETS[preset], target)
        config = dict(result.config)
        if target == "neox":  # a NeoX fragment goes into a model config
            config.update({"num_layers": 2, "hidden_size": 64, "num_attention_heads": 2, "pos_emb": "learned"})  # rotary: see the NeoX note
        if target == "hf":
            config.update({"output_dir": "out", "per_device_train_batch_size": 2, "learning_rate": 1e-5})
        if target == "deepspeed":
            config.update({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 8})
        path = tmp_path / preset / _FILE[target]
        path.parent.mkdir()
        path.write_text(json.dumps(config) if path.suffix == ".json" else yaml.safe_dump(config))
        report = lint_config_files([path])
        assert report.checked, (target, preset)
        assert report.at_or_above(Severity.WARNING) == (), [f.message for f in report.findings]


dtypes = st.sampled_from([torch.float32, torch.bfloat16, torch.float16])
policies = st.builds(Policy.derive, params=dtypes, compute=dtypes, grad_accum=dtypes, reduce=dtypes, optimizer_state=dtypes)


@settings(max_examples=300, deadline=None)
@given(policy=policies, target=st.sampled_from(sorted(EXPRESSIBLE)))
def test_any_policy_round_trips_where_expressible(policy, target):
    result = export(policy, target)
    back = from_config(target, result.config)
    if not result.cannot_express:
        assert back == policy
    else:
        assert back is not None


def test_cli_export(capsys):
    assert main(["export", "--policy", "bf16-mixed", "--to", "deepspeed"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["bf16"] == {"enabled": True} and out.err == ""
    assert main(["export", "--policy", "bf16-mixed", "--to", "torchtune"]) == 0
    out = capsys.readouterr()
    assert "# cannot express: params=fp32" in out.out and yaml.safe_load(out.out)["dtype"] == "bf16"
    assert main(["export", "--policy", "nonsense", "--to", "hf"]) == 2
    assert "--policy" in capsys.readouterr().err


def test_cli_export_of_a_framework_configured_in_code_prints_its_code_without_importing_torch():
    # Building the FSDP object imports torch (seconds, more under load); the command prints only the code that builds it.
    import subprocess
    import sys
    from pathlib import Path

    src = Path(__file__).resolve().parents[2] / "src"
    code = ("import sys; from ampdoctor.cli import main; rc = main(['export', '--policy', 'bf16-mixed', '--to', 'fsdp']); "
            "print('torch imported' if 'torch' in sys.modules else 'no torch'); sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(src)})
    assert proc.returncode == 0, proc.stderr
    assert "MixedPrecisionPolicy(" in proc.stdout and proc.stdout.rstrip().endswith("no torch")
    assert type(export(Policy.preset("bf16-mixed"), "fsdp").config).__name__ == "MixedPrecisionPolicy"  # the API still builds it


def test_every_target_exports():
    for target in TARGETS:
        assert export(Policy.preset("bf16-mixed"), target).text
