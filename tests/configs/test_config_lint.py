"""Config lint, rule by rule: a positive and a negative case each, asserting rule, file and line."""

import json
import textwrap
from pathlib import Path

from ampdoctor.core import Severity
from ampdoctor.lint.configs import lint_config_files


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def line_of(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


def lint(*paths: Path):
    return lint_config_files(list(paths))


def hits(report, rule: str):
    return [(Path(f.location.file).name, f.location.line) for f in report.findings if f.name == rule]


# --- DeepSpeed ----------------------------------------------------------------------------------------

DS_BOTH = """
{
  "train_micro_batch_size_per_gpu": 2,
  "fp16": {"enabled": true, "loss_scale": 0},
  "bf16": {
    "enabled": true
  },
  "zero_optimization": {"stage": 2}
}
"""


def test_deepspeed_fp16_and_bf16_both_enabled(tmp_path):
    ds = write(tmp_path, "ds.json", DS_BOTH)
    report = lint(ds)
    assert hits(report, "fp16-bf16-both-enabled") == [("ds.json", line_of(ds, '"enabled": true\n'.strip()) if False else 5)]
    finding = next(f for f in report.findings if f.name == "fp16-bf16-both-enabled")
    assert [r.line for r in finding.related] == [line_of(ds, '"fp16"')]


def test_deepspeed_one_half_mode_is_not_both_enabled(tmp_path):
    ds = write(tmp_path, "ds.json", DS_BOTH.replace('"fp16": {"enabled": true', '"fp16": {"enabled": false'))
    assert hits(lint(ds), "fp16-bf16-both-enabled") == []


def test_deepspeed_legacy_bfloat16_block_counts_as_bf16(tmp_path):
    ds = write(tmp_path, "ds.json", DS_BOTH.replace('"bf16"', '"bfloat16"'))
    assert hits(lint(ds), "fp16-bf16-both-enabled") == [("ds.json", 5)]


DS_BF16_GAS = """
{
  "train_batch_size": 512,
  "train_micro_batch_size_per_gpu": 4,
  "gradient_accumulation_steps": 8,
  "bf16": {"enabled": true},
  "zero_optimization": {"stage": 1}
}
"""


def test_deepspeed_bf16_accumulation_defaults_to_bf16(tmp_path):
    ds = write(tmp_path, "ds.json", DS_BF16_GAS)
    report = lint(ds)
    assert hits(report, "bf16-grad-accumulation") == [("ds.json", line_of(ds, '"bf16"'))]
    finding = next(f for f in report.findings if f.name == "bf16-grad-accumulation")
    assert [r.line for r in finding.related] == [line_of(ds, "gradient_accumulation_steps")]


def test_deepspeed_fp32_grad_accum_dtype_fixes_accumulation(tmp_path):
    ds = write(tmp_path, "ds.json", DS_BF16_GAS.replace('"zero_optimization"', '"data_types": {"grad_accum_dtype": "fp32"},\n  "zero_optimization"'))
    assert hits(lint(ds), "bf16-grad-accumulation") == []


def test_deepspeed_single_step_does_not_accumulate(tmp_path):
    ds = write(tmp_path, "ds.json", DS_BF16_GAS.replace('"gradient_accumulation_steps": 8', '"gradient_accumulation_steps": 1'))
    assert hits(lint(ds), "bf16-grad-accumulation") == []


def test_deepspeed_reduce_follows_bf16_and_is_a_warning_at_scale(tmp_path):
    # world size = 512 / (4 * 8) = 16 ranks
    ds = write(tmp_path, "ds.json", DS_BF16_GAS)
    finding = next(f for f in lint(ds).findings if f.name == "low-precision-reduce")
    assert finding.severity == Severity.WARNING and finding.location.line == line_of(ds, '"bf16"')
    assert "16 ranks" in finding.message


def test_deepspeed_small_world_reduce_is_only_info_and_fp32_comm_is_clean(tmp_path):
    small = write(tmp_path / "a", "ds.json", DS_BF16_GAS.replace("512", "64"))
    assert [f.severity for f in lint(small).findings if f.name == "low-precision-reduce"] == [Severity.INFO]
    fixed = write(tmp_path / "b", "ds.json", DS_BF16_GAS.replace('"zero_optimization"', '"communication_data_type": "fp32",\n  "zero_optimization"'))
    assert hits(lint(fixed), "low-precision-reduce") == []


def test_deepspeed_bf16_optimizer_states_with_fp32_master(tmp_path):
    ds = write(tmp_path, "ds.json", """
        {
          "train_micro_batch_size_per_gpu": 1,
          "bf16": {"enabled": true,
                   "bf16_optimizer_states": true},
          "zero_optimization": {"stage": 2}
        }
        """)
    assert hits(lint(ds), "low-precision-optimizer-state") == [("ds.json", line_of(ds, "bf16_optimizer_states"))]


def test_deepspeed_bf16_master_weights_is_pure_bf16(tmp_path):
    ds = write(tmp_path, "ds.json", """
        {
          "train_micro_batch_size_per_gpu": 1,
          "bf16": {"enabled": true, "bf16_master_weights_and_grads": true},
          "zero_optimization": {"stage": 2}
        }
        """)
    assert hits(lint(ds), "pure-bf16-optimizer") == [("ds.json", 3)]
    plain = write(tmp_path / "p", "ds.json", '{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 2}}')
    assert hits(lint(plain), "pure-bf16-optimizer") == []


def test_deepspeed_amp_with_zero_is_refused(tmp_path):
    ds = write(tmp_path, "ds.json", """
        {
          "train_micro_batch_size_per_gpu": 1,
          "amp": {"enabled": true, "opt_level": "O1"},
          "zero_optimization": {"stage": 2}
        }
        """)
    assert hits(lint(ds), "precision-strategy-mismatch") == [("ds.json", 3)]
    no_zero = write(tmp_path / "n", "ds.json", '{"train_micro_batch_size_per_gpu": 1, "amp": {"enabled": true}}')
    assert hits(lint(no_zero), "precision-strategy-mismatch") == []


# --- GPT-NeoX (incident 1) -----------------------------------------------------------------------------

NEOX = """
{
  "pipe_parallel_size": 1,
  "model_parallel_size": 1,
  "num_layers": 24,
  "hidden_size": 2048,
  "num_attention_heads": 16,
  "seq_length": 2048,
  "max_position_embeddings": 2048,
  "pos_emb": "rotary",
  "rotary_pct": 0.25,
  "zero_optimization": {"stage": 1},
  "train_micro_batch_size_per_gpu": 4,
  "bf16": {
    "bf16": true,
    "enabled": true,
    "loss_scale": 0,
  },
}
"""


def test_neox_bf16_block_without_precision_is_incident_1(tmp_path):
    cfg = write(tmp_path, "1-3B.yml", NEOX)
    report = lint(cfg)
    assert hits(report, "precision-config-mismatch") == [("1-3B.yml", line_of(cfg, '"enabled": true'))]
    finding = report.findings[[f.name for f in report.findings].index("precision-config-mismatch")]
    assert "rotary" in finding.message and [r.line for r in finding.related] == [line_of(cfg, '"pos_emb"')]


def test_neox_precision_in_a_second_file_is_merged(tmp_path):
    model = write(tmp_path, "1-3B.yml", NEOX)
    setup = write(tmp_path, "bf16.yml", '{"precision": "bfloat16", "data_path": "data/enwik8", "vocab_file": "v.json"}\n')
    report = lint(model, setup)
    assert hits(report, "precision-config-mismatch") == []
    # With precision bf16 and rotary, NeoX keeps the cos/sin cache in bf16.
    assert hits(report, "rope-cache-low-precision") == [("1-3B.yml", line_of(model, '"pos_emb"'))]
    assert {Path(c).name for c in report.checked} == {"1-3B.yml", "bf16.yml"}


def test_neox_precision_conflicting_with_block(tmp_path):
    cfg = write(tmp_path, "m.yml", NEOX.replace('"rotary_pct": 0.25,', '"precision": "fp16",'))
    report = lint(cfg)
    finding = next(f for f in report.findings if f.name == "precision-config-mismatch")
    assert finding.location.line == line_of(cfg, '"precision"')
    assert [r.line for r in finding.related] == [line_of(cfg, '"enabled": true')]


def test_neox_dash_spelling_and_fp32_allreduce(tmp_path):
    cfg = write(tmp_path, "m.yml", NEOX.replace('"rotary_pct": 0.25,', '"precision": "bfloat16",\n  "fp32-allreduce": true,'))
    report = lint(cfg)
    assert hits(report, "precision-config-mismatch") == [] and hits(report, "low-precision-reduce") == []


def test_neox_learned_positions_have_no_rope_warning(tmp_path):
    cfg = write(tmp_path, "m.yml", NEOX.replace('"rotary"', '"learned"').replace('"rotary_pct": 0.25,', '"precision": "bfloat16",'))
    assert hits(lint(cfg), "rope-cache-low-precision") == []


# --- accelerate -> DeepSpeed, HF -> DeepSpeed (cross-file) -----------------------------------------------

ACCEL = """
compute_environment: LOCAL_MACHINE
distributed_type: DEEPSPEED
deepspeed_config:
  deepspeed_config_file: ds.json
  zero3_init_flag: false
mixed_precision: bf16
num_machines: 1
num_processes: 8
"""


def test_accelerate_yaml_mixed_precision_beside_its_deepspeed_file_is_refused_at_launch(tmp_path):
    # accelerate's launch lists a `mixed_precision` taken from the YAML among the fields its DeepSpeed plugin refuses
    # beside a `deepspeed_config_file`: one warning at the key (the command line may pass `--mixed_precision` instead),
    # and its value is not compared with the file's fp16 block (it never reaches the engine).
    acc = write(tmp_path, "accelerate.yaml", ACCEL)
    ds = write(tmp_path, "ds.json", '{\n  "fp16": {"enabled": true},\n  "zero_optimization": {"stage": 2},\n  "gradient_accumulation_steps": "auto"\n}\n')
    report = lint(acc, ds)
    [finding] = [f for f in report.findings if f.name == "precision-config-mismatch"]
    assert finding.severity is Severity.WARNING and "refuses `mixed_precision`" in finding.message
    assert (Path(finding.location.file).name, finding.location.line) == ("accelerate.yaml", line_of(acc, "mixed_precision"))
    assert {(Path(r.file).name, r.line) for r in finding.related} == {("accelerate.yaml", line_of(acc, "deepspeed_config_file"))}
    assert hits(report, "fp16-bf16-both-enabled") == []


def test_accelerate_yaml_without_mixed_precision_leaves_the_deepspeed_file_to_decide(tmp_path):
    acc = write(tmp_path, "accelerate.yaml", ACCEL.replace("mixed_precision: bf16\n", ""))
    ds = write(tmp_path, "ds.json", '{"bf16": {"enabled": true},\n "communication_data_type": "fp32",\n "data_types": {"grad_accum_dtype": "fp32"}, "zero_optimization": {"stage": 2}}')
    report = lint(acc, ds)
    assert [f for f in report.findings if f.severity != Severity.INFO] == []
    assert {Path(c).name for c in report.checked} == {"accelerate.yaml", "ds.json"}
    # the same YAML with `mixed_precision: null` (what accelerate writes for "not set"): not refused either
    null = write(tmp_path, "accelerate.yaml", ACCEL.replace("mixed_precision: bf16", "mixed_precision: null"))
    assert [f for f in lint(null, ds).findings if f.severity != Severity.INFO] == []


def test_accelerate_missing_deepspeed_file_is_an_input_error_that_does_not_decide_the_exit(tmp_path):
    # The DeepSpeed file may be generated or live elsewhere: it is reported at the key, and the rest of the
    # tree still decides the exit code.
    acc = write(tmp_path, "accelerate.yaml", ACCEL.replace("ds.json", "missing.json"))
    report = lint(acc)
    assert [(Path(e.file).name, e.line) for e in report.errors] == [("accelerate.yaml", line_of(acc, "deepspeed_config_file"))]
    assert not report.errors[0].fatal


def test_accelerate_fsdp_bf16_reduces_in_bf16(tmp_path):
    acc = write(tmp_path, "accelerate.yaml", """
        compute_environment: LOCAL_MACHINE
        distributed_type: FSDP
        fsdp_config:
          fsdp_sharding_strategy: FULL_SHARD
          fsdp_version: 2
        mixed_precision: bf16
        num_machines: 4
        num_processes: 32
        """)
    finding = next(f for f in lint(acc).findings if f.name == "low-precision-reduce")
    assert finding.location.line == line_of(acc, "fsdp_config") and finding.severity == Severity.WARNING
    ddp = write(tmp_path / "ddp", "accelerate.yaml", ACCEL.replace("DEEPSPEED", "MULTI_GPU"))
    assert hits(lint(ddp), "low-precision-reduce") == []


HF_ARGS = {
    "output_dir": "out",
    "per_device_train_batch_size": 4,
    "gradient_accumulation_steps": 4,
    "learning_rate": 2e-5,
    "bf16": True,
    "deepspeed": "ds_config.json",
}


def test_hf_bf16_against_explicit_fp16_deepspeed(tmp_path):
    args = write(tmp_path, "args.json", json.dumps(HF_ARGS, indent=2))
    ds = write(tmp_path, "ds_config.json", '{\n  "fp16": {\n    "enabled": true\n  },\n  "gradient_accumulation_steps": "auto",\n  "zero_optimization": {"stage": 2}\n}\n')
    finding = next(f for f in lint(args, ds).findings if f.name == "precision-config-mismatch")
    assert (Path(finding.location.file).name, finding.location.line) == ("args.json", line_of(args, '"bf16"'))
    assert ("ds_config.json", 3) in {(Path(r.file).name, r.line) for r in finding.related}


def test_hf_auto_deepspeed_takes_hf_values(tmp_path):
    args = write(tmp_path, "args.json", json.dumps(HF_ARGS, indent=2))
    ds = write(tmp_path, "ds_config.json", '{"bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"}, "gradient_accumulation_steps": "auto", "zero_optimization": {"stage": 2}}')
    report = lint(args, ds)
    assert hits(report, "precision-config-mismatch") == []
    # The HF side decides bf16 and 4 accumulation steps; DeepSpeed then accumulates in bf16. The finding
    # sits at the HF key that turned bf16 on and names the DeepSpeed "auto" it filled.
    finding = next(f for f in report.findings if f.name == "bf16-grad-accumulation")
    assert (Path(finding.location.file).name, finding.location.line) == ("args.json", line_of(args, '"bf16"'))
    assert {(Path(r.file).name, r.line) for r in finding.related} == {("args.json", line_of(args, "gradient_accumulation_steps")), ("ds_config.json", 1)}


def test_hf_both_flags_and_mixed_half_types(tmp_path):
    both = write(tmp_path / "a", "args.json", json.dumps({**HF_ARGS, "fp16": True, "deepspeed": None}, indent=2))
    assert hits(lint(both), "fp16-bf16-both-enabled") == [("args.json", line_of(both, '"fp16"'))]
    mixed = write(tmp_path / "b", "args.json", json.dumps({**HF_ARGS, "torch_dtype": "float16", "deepspeed": None}, indent=2))
    assert hits(lint(mixed), "mixed-half-dtypes") == [("args.json", line_of(mixed, '"bf16"'))]
    clean = write(tmp_path / "c", "args.json", json.dumps({**HF_ARGS, "deepspeed": None}, indent=2))
    assert [f.name for f in lint(clean).findings] == []


def test_hf_fp16_on_fp16_weights_and_scaler_on_bf16_weights(tmp_path):
    fp16 = write(tmp_path / "a", "args.json", json.dumps({**HF_ARGS, "bf16": False, "fp16": True, "torch_dtype": "float16", "deepspeed": None}, indent=2))
    assert hits(lint(fp16), "grad-scaler-with-fp16-params") == [("args.json", line_of(fp16, '"fp16"'))]
    lora = write(tmp_path / "b", "args.json", json.dumps({**HF_ARGS, "bf16": False, "fp16": True, "torch_dtype": "float16", "use_peft": True, "deepspeed": None}, indent=2))
    assert hits(lint(lora), "grad-scaler-with-fp16-params") == []
    bf16w = write(tmp_path / "c", "args.json", json.dumps({**HF_ARGS, "bf16": False, "fp16": True, "torch_dtype": "bfloat16", "deepspeed": None}, indent=2))
    assert hits(lint(bf16w), "grad-scaler-with-bf16") == [("args.json", line_of(bf16w, '"fp16"'))]


def test_hf_flash_attention_on_fp32_model(tmp_path):
    base = {"output_dir": "o", "per_device_train_batch_size": 1, "learning_rate": 1e-5, "attn_implementation": "flash_attention_2"}
    fp32 = write(tmp_path / "a", "args.json", json.dumps(base, indent=2))
    report = lint(fp32)
    assert hits(report, "flash-attention-fp32-model") == [("args.json", line_of(fp32, "attn_implementation"))]
    assert report.findings[0].severity == Severity.WARNING
    bf16 = write(tmp_path / "b", "args.json", json.dumps({**base, "torch_dtype": "bfloat16"}, indent=2))
    assert hits(lint(bf16), "flash-attention-fp32-model") == []


def test_hf_bf16_weights_under_bf16_autocast_has_no_master_copy(tmp_path):
    args = write(tmp_path, "args.json", json.dumps({**HF_ARGS, "torch_dtype": "bfloat16", "deepspeed": None}, indent=2))
    assert hits(lint(args), "mixed-precision-without-master-weights") == [("args.json", line_of(args, '"bf16"'))]


def test_hf_t5_fine_tuned_in_fp16(tmp_path):
    base = {**HF_ARGS, "bf16": False, "fp16": True, "deepspeed": None, "model_name_or_path": "google/flan-t5-xl"}
    args = write(tmp_path / "a", "args.json", json.dumps(base, indent=2))
    assert hits(lint(args), "keep-fp32-module-cast") == [("args.json", line_of(args, '"fp16"'))]
    gpt = write(tmp_path / "b", "args.json", json.dumps({**base, "model_name_or_path": "gpt2"}, indent=2))
    assert hits(lint(gpt), "keep-fp32-module-cast") == []


# --- Lightning -------------------------------------------------------------------------------------------


def test_lightning_true_precision_under_deepspeed(tmp_path):
    cfg = write(tmp_path, "config.yaml", "trainer:\n  devices: 4\n  strategy: deepspeed_stage_2\n  precision: bf16-true\n")
    assert hits(lint(cfg), "precision-strategy-mismatch") == [("config.yaml", 4)]
    ok = write(tmp_path / "ok", "config.yaml", "trainer:\n  devices: 4\n  strategy: ddp\n  precision: bf16-mixed\n")
    assert lint(ok).findings == ()


def test_lightning_bf16_true_fsdp_keeps_fp32_and_reduces_in_bf16(tmp_path):
    cfg = write(tmp_path, "config.yaml", "trainer:\n  devices: 8\n  num_nodes: 4\n  strategy: fsdp\n  precision: bf16-true\n")
    report = lint(cfg)
    assert hits(report, "precision-strategy-mismatch") == [("config.yaml", 5)]
    assert hits(report, "low-precision-reduce") == [("config.yaml", 4)]
    assert next(f for f in report.findings if f.name == "low-precision-reduce").severity == Severity.WARNING


def test_lightning_true_precision_with_accumulation_and_fp16_true(tmp_path):
    cfg = write(tmp_path, "config.yaml", "trainer:\n  devices: 1\n  precision: bf16-true\n  accumulate_grad_batches: 8\n")
    report = lint(cfg)
    # bf16-true is pure bf16 by design: accumulating in bf16 follows the weights (a note), and the pure-bf16
    # optimizer hazard is its own (opt-in) rule
    assert sorted((f.name, f.location.line, f.severity.value) for f in report.findings if f.name in ("bf16-grad-accumulation", "pure-bf16-optimizer")) == [
        ("bf16-grad-accumulation", 3, "info"), ("pure-bf16-optimizer", 3, "warning")]
    fp16 = write(tmp_path / "h", "config.yaml", "trainer:\n  devices: 1\n  precision: 16-true\n")
    assert hits(lint(fp16), "fp16-without-loss-scaling") == [("config.yaml", 3)]


def test_lightning_unknown_precision(tmp_path):
    cfg = write(tmp_path, "config.yaml", "trainer:\n  max_epochs: 1\n  precision: bf32\n")
    assert hits(lint(cfg), "precision-strategy-mismatch") == [("config.yaml", 3)]


# --- SimpleTuner (incident 3) ----------------------------------------------------------------------------

ENV = """
export MODEL_TYPE='lora'
export PRETRAINED_MODEL_NAME_OR_PATH="black-forest-labs/FLUX.1-dev"
export MIXED_PRECISION="bf16"
export GRADIENT_ACCUMULATION_STEPS=4
export OPTIMIZER="adamw_bf16"
export TRAINER_EXTRA_ARGS="--lora_rank=16 --gradient_precision=fp32"
"""


def test_simpletuner_fp32_gradients_with_accumulation_is_incident_3(tmp_path):
    env = write(tmp_path, "config.env", ENV)
    finding = next(f for f in lint(env).findings if f.name == "grad-dtype-mismatch")
    line = line_of(env, "--gradient_precision")
    assert (finding.location.line, finding.location.column) == (line, env.read_text().splitlines()[line - 1].index("--gradient_precision") + 1)
    # the optimizer's place too: whether its step takes an fp32 gradient of bf16 weights decides the severity (AMP003)
    assert {r.line for r in finding.related} == {line_of(env, "MIXED_PRECISION"), line_of(env, "GRADIENT_ACCUMULATION_STEPS"),
                                                 line_of(env, "OPTIMIZER")}


def test_simpletuner_without_accumulation_or_with_unmodified_grads(tmp_path):
    one = write(tmp_path / "a", "config.env", ENV.replace("STEPS=4", "STEPS=1"))
    assert hits(lint(one), "grad-dtype-mismatch") == []
    unmodified = write(tmp_path / "b", "config.env", ENV.replace("--gradient_precision=fp32", "--gradient_precision=unmodified"))
    report = lint(unmodified)
    assert hits(report, "grad-dtype-mismatch") == []
    [accumulation] = [f for f in report.findings if f.name == "bf16-grad-accumulation"]
    assert (accumulation.location.line, accumulation.severity.value) == (line_of(unmodified, "MIXED_PRECISION"), "info")


def test_simpletuner_json_flags_and_bf16_only_optimizer(tmp_path):
    cfg = write(tmp_path, "config.json", json.dumps({"--model_type": "full", "--mixed_precision": "no", "--optimizer": "adamw_bf16",
                                                     "--output_dir": "out"}, indent=2))
    assert hits(lint(cfg), "optimizer-dtype-mismatch") == [("config.json", line_of(cfg, "--optimizer"))]
    ok = write(tmp_path / "ok", "config.json", json.dumps({"--model_type": "full", "--mixed_precision": "bf16", "--optimizer": "adamw_bf16"}, indent=2))
    assert hits(lint(ok), "optimizer-dtype-mismatch") == []


def test_simpletuner_env_and_json_disagree(tmp_path):
    env = write(tmp_path, "config.env", ENV)
    js = write(tmp_path, "config.json", json.dumps({"--model_type": "lora", "--mixed_precision": "fp16"}, indent=2))
    finding = next(f for f in lint(env, js).findings if f.name == "precision-config-mismatch")
    assert (Path(finding.location.file).name, finding.location.line) == ("config.json", line_of(js, "--mixed_precision"))
    assert [(Path(r.file).name, r.line) for r in finding.related] == [("config.env", line_of(env, "MIXED_PRECISION"))]


# --- H2O LLM Studio (incident 4) -------------------------------------------------------------------------

H2O = """
architecture:
    backbone_dtype: bfloat16
    gradient_checkpointing: true
environment:
    gpus:
    - '0'
    mixed_precision: true
    seed: -1
llm_backbone: h2oai/h2o-danube-1.8b-base
problem_type: text_causal_language_modeling
training:
    batch_size: 2
    grad_accumulation: 1
    lora: true
    optimizer: AdamW
"""


def test_h2o_bf16_backbone_with_mixed_precision_is_incident_4(tmp_path):
    cfg = write(tmp_path, "cfg.yaml", H2O)
    report = lint(cfg)
    assert hits(report, "grad-scaler-with-bf16") == [("cfg.yaml", line_of(cfg, "mixed_precision"))]
    finding = next(f for f in report.findings if f.name == "grad-scaler-with-bf16")
    assert [r.line for r in finding.related] == [line_of(cfg, "backbone_dtype")]


def test_h2o_bfloat16_mixed_precision_dtype_has_no_scaler(tmp_path):
    cfg = write(tmp_path, "cfg.yaml", H2O.replace("    mixed_precision: true\n", "    mixed_precision: true\n    mixed_precision_dtype: bfloat16\n"))
    report = lint(cfg)
    assert hits(report, "grad-scaler-with-bf16") == [] and hits(report, "mixed-half-dtypes") == []
    fp16 = write(tmp_path / "f", "cfg.yaml", H2O.replace("    mixed_precision: true\n", "    mixed_precision: true\n    mixed_precision_dtype: float16\n"))
    assert hits(lint(fp16), "grad-scaler-with-bf16") == [("cfg.yaml", line_of(fp16, "mixed_precision_dtype"))]


# --- torchtune ---------------------------------------------------------------------------------------------

TUNE = """
model:
  _component_: torchtune.models.llama3_2.llama3_2_1b
optimizer:
  _component_: torch.optim.AdamW
  lr: 2e-5
gradient_accumulation_steps: 1
device: cuda
dtype: bf16
"""


def test_torchtune_bf16_with_plain_adamw_and_fp16(tmp_path):
    cfg = write(tmp_path, "full.yaml", TUNE)
    assert hits(lint(cfg), "pure-bf16-optimizer") == [("full.yaml", line_of(cfg, "dtype"))]
    sr = write(tmp_path / "sr", "full.yaml", TUNE.replace("  lr: 2e-5", "  lr: 2e-5\n  bf16_stochastic_round: true"))
    assert hits(lint(sr), "pure-bf16-optimizer") == []
    fp16 = write(tmp_path / "h", "full.yaml", TUNE.replace("dtype: bf16", "dtype: fp16"))
    assert hits(lint(fp16), "precision-strategy-mismatch") == [("full.yaml", line_of(fp16, "dtype"))]


# --- hardware named in configs ------------------------------------------------------------------------------


def test_bf16_next_to_a_v100_launcher(tmp_path):
    ds = write(tmp_path, "ds.json", '{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 2}}')
    sky = write(tmp_path, "sky.yaml", "resources:\n  cloud: gcp\n  accelerators: V100:8\nrun: deepspeed train.py\n")
    report = lint(ds, sky)
    # Volta: current torch runs bf16 emulated (a warning); Pascal has no bf16 at all (an error).
    finding = next(f for f in report.findings if f.name == "bf16-support-emulated")
    assert (Path(finding.location.file).name, finding.location.line, finding.severity.value) == ("sky.yaml", 3, "warning")
    assert [(Path(r.file).name, r.line) for r in finding.related] == [("ds.json", 1)]
    assert hits(report, "bf16-unsupported-hardware") == []
    p100 = write(tmp_path / "p", "sky.yaml", "resources:\n  accelerators: P100:4\n")
    ds3 = write(tmp_path / "p", "ds.json", ds.read_text())
    assert hits(lint(ds3, p100), "bf16-unsupported-hardware") == [("sky.yaml", 2)]
    a100 = write(tmp_path / "a", "sky.yaml", "resources:\n  accelerators: A100:8\n")
    ds2 = write(tmp_path / "a", "ds.json", ds.read_text())
    assert hits(lint(ds2, a100), "bf16-unsupported-hardware") == []


# --- what is not a training config ------------------------------------------------------------------------------


def test_unrelated_json_and_yaml_are_skipped_silently(tmp_path):
    pkg = write(tmp_path, "package.json", '{"name": "x", "version": "1.0.0", "scripts": {"test": "jest"}, "devDependencies": {"typescript": "5"}}')
    wf = write(tmp_path, ".github/workflows/ci.yml", "name: CI\non: [push]\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n")
    k8s = write(tmp_path, "deploy.yaml", "apiVersion: v1\nkind: Pod\n---\napiVersion: v1\nkind: Service\n")
    env = write(tmp_path, ".env", "DATABASE_URL=postgres://x\nDEBUG=1\n")
    report = lint(pkg, wf, k8s, env)
    assert report.findings == () and report.checked == () and report.errors == ()


def test_a_transformers_model_config_is_no_training_config(tmp_path):
    # The config.json saved beside a model's weights: rotary keys GPT-NeoX's configs use too, and (Qwen-1) `bf16: true`
    # and a `torch_dtype` beside them. They describe the model, not a run: neither GPT-NeoX's reader (a bf16 block with
    # no `precision`) nor the training-arguments reader takes it. The same keys without the model config's marks still
    # read as GPT-NeoX's.
    keys = ('"bf16": true, "fp16": false, "hidden_size": 2048, "num_hidden_layers": 16, "rotary_emb_base": 10000, '
            '"rotary_pct": 1.0, "seq_length": 8192, "torch_dtype": "bfloat16"')
    model = write(tmp_path, "qwen/config.json", '{"architectures": ["QWenLMHeadModel"], "model_type": "qwen", '
                  '"transformers_version": "4.32.0", ' + keys + "}")
    report = lint(model)
    assert report.findings == () and report.checked == ()
    neox_like = write(tmp_path, "neox/config.json", "{" + keys + "}")
    assert lint(neox_like).checked


def test_a_referenced_deepspeed_file_is_judged_as_its_launcher_fills_it_not_also_alone(tmp_path):
    ds = write(tmp_path, "ds.json", '{"bf16": {"enabled": true}, "gradient_accumulation_steps": "auto", "zero_optimization": {"stage": 2}}')
    args = write(tmp_path, "train_args.yaml", "model_name_or_path: m\noutput_dir: out\nbf16: true\ngradient_accumulation_steps: 4\ndeepspeed: ds.json\n")
    found = [f for f in lint(ds, args).findings if f.name == "bf16-grad-accumulation"]
    # One verdict, with the launcher's 4 micro-batches; not a second "if gradients are accumulated" note on ds.json alone.
    assert len(found) == 1 and "4 micro-batches" in found[0].message


def test_empty_and_template_json_are_notes_not_input_errors(tmp_path):
    # A launcher's Jinja-templated DeepSpeed config and an empty placeholder are no config that runs: a note each.
    # A JSON file that is merely broken stays an input error.
    (tmp_path / "empty.json").write_text("\n")
    (tmp_path / "ds_template.json").write_text('{\n  "train_micro_batch_size_per_gpu": {{ micro_batch }},\n  "bf16": {"enabled": true}\n}\n')
    (tmp_path / "broken.json").write_text('{"bf16": {"enabled": true},}\n')
    # a dataset saved as JSON Lines under a .json name is data; two configs pasted one after the other are not
    (tmp_path / "train_data.json").write_text('{"prompt": "a", "answer": "b"}\n{"prompt": "c", "answer": "d"}\n\n[1, 2]\n')
    (tmp_path / "pasted.json").write_text('{"bf16": {"enabled": true}}\n{"fp16": {"enabled":\n true}}\n')
    report = lint_config_files(sorted(tmp_path.iterdir()))
    assert sorted(e.file for e in report.errors) == [str(tmp_path / "broken.json"), str(tmp_path / "pasted.json")]
    assert sorted(n.split(":")[0] for n in report.info.notes) == [str(tmp_path / "ds_template.json"), str(tmp_path / "empty.json"),
                                                                  str(tmp_path / "train_data.json")]
    assert str(tmp_path / "empty.json") not in report.checked



def test_another_tools_json_with_comments_is_a_note_and_a_training_config_with_comments_an_input_error(tmp_path):
    # tsconfig.json and editors' settings are JSONC: read so (comments, trailing commas), they are no training config
    (tmp_path / "tsconfig.json").write_text('/* header */\n{\n  "compilerOptions": {"strict": true, "paths": {"@/*": ["./src/*"]},},\n'
                                            '  // the app\n  "include": ["src", "a // b"],\n}\n')
    # a DeepSpeed config with a comment fails in DeepSpeed's json.load: still an input error
    (tmp_path / "ds_config.json").write_text('{\n  // bf16 on\n  "bf16": {"enabled": true},\n  "zero_optimization": {"stage": 2}\n}\n')
    report = lint_config_files(sorted(tmp_path.iterdir()))
    assert [e.file for e in report.errors] == [str(tmp_path / "ds_config.json")]
    assert [n.split(":")[0] for n in report.info.notes] == [str(tmp_path / "tsconfig.json")]


def test_json_in_utf16_with_a_byte_order_mark_is_read(tmp_path):
    # Windows tools write JSON in UTF-16 with a BOM (a vocabulary here); Python's json reads it: no input error
    (tmp_path / "vocab.json").write_bytes('{"0": "\\t", "1": "\\n"}'.encode("utf-16"))
    (tmp_path / "ds_config.json").write_bytes('{"bf16": {"enabled": true}, "fp16": {"enabled": true}}'.encode("utf-16"))
    report = lint_config_files(sorted(tmp_path.iterdir()))
    assert report.errors == () and any(f.rule_id == "AMP115" for f in report.findings)

# --- keys a project's own argument classes declare ----------------------------------------------------------

_OWN_DTYPE = '''
from dataclasses import dataclass
from transformers import TrainingArguments


@dataclass
class Base(TrainingArguments):
    pass


@dataclass
class RunArguments(Base):
    dtype: str = "float32"  # the project maps it to accelerate's mixed_precision
'''
_PURE_BF16_JSON = '{"model_name_or_path": "m", "output_dir": "o", "per_device_train_batch_size": 8, "learning_rate": 1e-4, "dtype": "bfloat16"}\n'


def test_a_key_the_projects_trainingarguments_subclass_declares_is_not_read_as_the_load_dtype(tmp_path):
    from ampdoctor.lint import LintSettings, lint_paths

    settings = LintSettings(select=frozenset({"ALL"}), jobs=1)
    own, other, tested = tmp_path / "own", tmp_path / "other", tmp_path / "tested"
    write(own, "args.py", _OWN_DTYPE)  # declared on a subclass of a subclass, in the same file
    write(tested, "tests/test_args.py", _OWN_DTYPE)  # a test's class is not the project's argument class
    for folder in (own, other, tested):
        write(folder, "train.json", _PURE_BF16_JSON)
    # each folder linted is its own project: one's declaration does not change how another's configs are read
    report = lint_paths([own, other, tested], settings)
    assert sorted(Path(f.location.file).parent.name for f in report.findings if f.rule_id == "AMP119") == ["other", "tested"]
    # a config named alone is read with the classes of the project it is judged in
    assert [f for f in lint_paths([own / "train.json"], settings.override(project=own)).findings if f.rule_id == "AMP119"] == []
    assert [f.rule_id for f in lint_paths([own / "train.json"], settings).findings if f.rule_id == "AMP119"] == ["AMP119"]


def test_amp126_names_keep_fp32_modules_only_of_the_t5_family(tmp_path):
    """Gemma, Llama 3 and Qwen declare no `_keep_in_fp32_modules` in transformers: a cast of theirs is told as a cast
    of the weights, not as one that undoes T5's keep-fp32 `wo`."""
    for model, says_wo in (("google/gemma-2-2b", False), ("google/flan-t5-xl", True)):
        config = write(tmp_path / model.split("/")[1], "sft.yaml", f"""
            model_name_or_path: {model}
            torch_dtype: float16
            output_dir: out
            learning_rate: 2.0e-5
        """)
        messages = [f.message for f in lint(config).findings if f.name == "keep-fp32-module-cast"]
        assert messages and all("weights cast to fp16" in m and ("`wo`" in m) == says_wo for m in messages), messages
