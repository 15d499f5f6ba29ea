"""Thousands of random and malformed config files: lint never raises, malformed files are input errors with a
line, and the CLI exits 2 naming the file and line, never with a traceback."""

import json
import string
import subprocess
import sys
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ampdoctor.lint.configs import lint_config_files

KEYS = ["bf16", "fp16", "bfloat16", "enabled", "precision", "mixed_precision", "distributed_type", "deepspeed_config",
        "deepspeed_config_file", "zero_optimization", "stage", "gradient_accumulation_steps", "trainer", "strategy",
        "devices", "architecture", "backbone_dtype", "environment", "mixed_precision_dtype", "training", "dtype",
        "_component_", "--mixed_precision", "--gradient_precision", "pos_emb", "num_layers", "hidden_size",
        "communication_data_type", "data_types", "grad_accum_dtype", "torch_dtype", "output_dir", "learning_rate",
        "per_device_train_batch_size", "resources", "accelerators", "model", "optimizer", "fsdp_config", "lora"]
VALUES = st.one_of(st.none(), st.booleans(), st.integers(-3, 64), st.floats(allow_nan=True), st.sampled_from(
    ["auto", "bf16", "fp16", "no", "bfloat16", "float16", "fp32", "bf16-true", "16-mixed", "deepspeed_stage_3", "fsdp",
     "V100:8", "torchtune.models.x", "rotary", "ds.json", "", "DEEPSPEED", "FSDP"]), st.text(max_size=8))
configs = st.recursive(st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=6),
                       lambda inner: st.dictionaries(st.sampled_from(KEYS), st.one_of(VALUES, inner, st.lists(inner, max_size=2)), max_size=6),
                       max_leaves=25)

FUZZ = settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _lint_text(folder: Path, name: str, text: str):
    path = folder / name
    path.write_text(text)
    return lint_config_files([path])


@FUZZ
@given(data=configs, name=st.sampled_from(["ds.json", "a.yaml", "config.yml", "args.json"]))
def test_structured_random_configs_never_raise(tmp_path_factory, data, name):
    folder = tmp_path_factory.mktemp("s")
    text = json.dumps(data) if name.endswith(".json") else yaml.safe_dump(data)
    report = _lint_text(folder, name, text)
    assert all(e.fatal is False or "not found" in e.message or e.line for e in report.errors)
    for f in report.findings:
        assert f.location.file


@FUZZ
@given(text=st.text(alphabet=string.printable + "{}[]:,\"'#-\t\u00e9", max_size=200),
       name=st.sampled_from(["x.json", "x.yaml", "config.env"]))
def test_malformed_text_is_an_input_error_never_an_exception(tmp_path_factory, text, name):
    report = _lint_text(tmp_path_factory.mktemp("m"), name, text)
    for error in report.errors:
        assert error.file.endswith(name) or "not found" in error.message


@FUZZ
@given(data=configs, cut=st.integers(1, 400))
def test_truncated_json_reports_the_parser_line(tmp_path_factory, data, cut):
    text = json.dumps(data, indent=2)
    truncated = text[: min(cut, len(text) - 1)]
    report = _lint_text(tmp_path_factory.mktemp("t"), "ds.json", truncated)
    try:
        json.loads(truncated)
    except json.JSONDecodeError as exc:
        assert [(e.line, e.column) for e in report.errors] == [(exc.lineno, exc.colno)]


def _cli(*args: str):
    return subprocess.run([sys.executable, "-m", "ampdoctor", "lint", "--no-config", *args], capture_output=True, text=True)


def test_cli_malformed_files_exit_2_with_file_and_line(tmp_path):
    cases = {"bad.json": '{\n  "bf16": {"enabled": true,}\n}\n', "bad.yaml": "trainer:\n  precision: [bf16\n",
             "config.env": 'export MIXED_PRECISION=bf16\nexport TRAINER_EXTRA_ARGS="--x\n'}
    for name, text in cases.items():
        path = tmp_path / name
        path.write_text(text)
        result = _cli(str(path))
        assert result.returncode == 2, (name, result.stdout, result.stderr)
        assert "Traceback" not in result.stdout + result.stderr
        assert f"{path}:" in result.stdout + result.stderr


def test_cli_exit_codes_follow_fail_on(tmp_path):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("trainer:\n  devices: 1\n  precision: bf16-true\n  accumulate_grad_batches: 4\n")
    # pure bf16 is a design choice: its optimizer rule is opt-in, and bf16 accumulation under it is a note
    assert _cli(str(cfg)).returncode == 0
    assert _cli("--fail-on", "warning", str(cfg)).returncode == 0
    assert _cli("--fail-on", "info", str(cfg)).returncode == 1
    assert _cli("--fail-on", "warning", "--extend-select", "AMP119", str(cfg)).returncode == 1
    assert _cli("--fail-on", "warning", "--select", "ALL", "--ignore", "pure-bf16-optimizer", str(cfg)).returncode == 0
    sarif = _cli("--format", "sarif", "--extend-select", "AMP119", str(cfg))
    assert json.loads(sarif.stdout)["runs"][0]["results"]


def test_cli_lints_the_examples_directory():
    root = Path(__file__).resolve().parents[2] / "examples" / "configs"
    result = _cli("--format", "json", str(root))
    assert result.returncode == 1
    names = {(Path(f["location"]["file"]).parent.name, f["name"]) for f in json.loads(result.stdout)["findings"]}
    assert {("incident1_neox", "precision-config-mismatch"), ("incident3_simpletuner", "grad-dtype-mismatch"),
            ("incident4_h2o", "grad-scaler-with-bf16")} <= names
    assert not {n for n in names if n[0].startswith("clean_") and n[1] not in ("low-precision-reduce",)}
