"""One Reader protocol, one registry: a framework is one module ending in `READER = Reader(...)` plus one line in
`ampdoctor.frameworks.READERS`, and lint names no framework. torchtitan's TOML job config is the reader that shows it."""

import ast
import textwrap
from pathlib import Path

import pytest

import ampdoctor.frameworks as frameworks
from ampdoctor.frameworks import READERS, TARGETS, export, from_config, reader_for, reader_named
from ampdoctor.frameworks.located import load_documents
from ampdoctor.lint import LintSettings, lint_paths
from ampdoctor.lint.configs import lint_config_files

SRC = Path(frameworks.__file__).parent
NAMES = sorted({r.name for r in READERS} | {r.target for r in READERS} | {r.title.lower() for r in READERS})


def toml(tmp_path: Path, text: str, name: str = "job.toml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def test_lint_of_configs_names_no_framework():
    source = (SRC.parent / "lint" / "configs.py").read_text()
    imported = {f"{n.module}.{a.name}" for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ImportFrom) for a in n.names}
    framework_modules = {f"ampdoctor.frameworks.{p.stem}" for p in SRC.glob("*.py")} - {
        f"ampdoctor.frameworks.{m}" for m in ("base", "located", "reader", "document")}
    assert sorted(m for m in imported if m in framework_modules or m.rpartition(".")[0] in framework_modules) == []
    code = "\n".join(line.split("#", 1)[0] for line in source.splitlines())
    assert [name for name in NAMES if f'"{name}"' in code or f"{name}." in code.lower()] == []


def test_every_framework_module_is_registered_once():
    modules = [p.stem for p in SRC.glob("*.py") if "\nREADER = Reader(" in p.read_text()]
    assert len(modules) == len(READERS) == len({id(r) for r in READERS})
    assert sorted(getattr(frameworks, m).READER.name for m in modules) == sorted(r.name for r in READERS)
    assert "torchtitan" in TARGETS and reader_named("neox") is reader_named("gpt-neox") is not None


def test_torchtitan_job_config_is_read_with_key_locations(tmp_path):
    path = toml(tmp_path, """
        [job]
        description = "llama3 8b"

        [training]
        dtype = "bfloat16"
        mixed_precision_param = "bfloat16"
        local_batch_size = 2
        global_batch_size = 32

        [parallelism]
        data_parallel_shard_degree = 4
        tensor_parallel_degree = 2
    """)
    docs, error = load_documents(path)
    assert error is None and reader_for(docs[0]) is reader_named("torchtitan")
    reading = reader_named("torchtitan").read(docs[0])
    assert str(reading.policy) == "params=bf16,compute=bf16,output=bf16,grads=bf16,grad_accum=bf16,reduce=fp32,optimizer_state=bf16,loss_scale=none"
    assert (reading.fact("strategy"), reading.fact("world_size"), reading.fact("grad_accum_steps"), reading.fact("autocast")) == ("fsdp", 8, 4, False)
    assert (reading.sources["params"].line, reading.sources["params"].column) == (5, 1)
    assert reading.locate()("world_size").line == 10


def test_torchtitan_without_fsdp_autocasts_and_reduces_in_the_gradient_dtype(tmp_path):
    path = toml(tmp_path, """
        [training]
        mixed_precision_param = "bfloat16"
        [parallelism]
        data_parallel_replicate_degree = 8
        data_parallel_shard_degree = 1
    """)
    reading = reader_named("torchtitan").read(load_documents(path)[0][0])
    assert (reading.fact("strategy"), reading.fact("autocast"), reading.policy.compute, reading.policy.reduce) == ("ddp", True, "bf16", "fp32")


def test_torchtitan_refuses_a_bf16_reduce_and_lint_says_so_at_the_key(tmp_path):
    path = toml(tmp_path, """
        [training]
        mixed_precision_param = "bfloat16"
        mixed_precision_reduce = "bfloat16"
    """)
    report = lint_config_files([path])
    assert [(e.line, e.column, e.message) for e in report.errors] == [
        (3, 1, "training.mixed_precision_reduce = 'bfloat16': torchtitan accepts float32")]


def test_malformed_toml_is_an_input_error_with_its_line_and_an_unrelated_toml_is_skipped(tmp_path):
    bad = toml(tmp_path, "[training]\nmixed_precision_param = \n", "bad.toml")
    toml(tmp_path, '[project]\nname = "x"\n[tool.ruff]\nline-length = 120\n', "pyproject.toml")
    report = lint_paths([tmp_path], LintSettings(jobs=1))
    assert [(Path(e.file).name, e.line) for e in report.errors] == [(bad.name, 2)]
    assert report.errors[0].message.startswith("invalid TOML: ")
    assert report.findings == ()


@pytest.mark.parametrize("preset, text", [
    ("bf16-mixed", 'mixed_precision_param = "bfloat16"'),
    ("fp32", 'mixed_precision_param = "float32"'),
])
def test_torchtitan_export_is_valid_toml_that_reads_back(preset, text, tmp_path):
    from ampdoctor.policy import PRESETS

    result = export(PRESETS[preset], "torchtitan")
    assert result.syntax == "toml" and text in result.text and result.cannot_express == ()
    path = toml(tmp_path, result.text)
    assert from_config("torchtitan", path) == PRESETS[preset]


def test_deepspeed_world_size_only_from_a_written_accumulation(tmp_path):
    # train_batch_size = micro * accumulation * ranks: without the accumulation written, DeepSpeed derives it from the
    # world size, so the world size is unknown (not 64 / 16 = 4 ranks with an assumed accumulation of 1).
    path = tmp_path / "ds.json"
    path.write_text('{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 16, "bf16": {"enabled": true}}')
    docs, _ = load_documents(path)
    assert reader_named("deepspeed").read(docs[0]).fact("world_size") is None
    path.write_text('{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 16, "gradient_accumulation_steps": 2, "bf16": {"enabled": true}}')
    docs, _ = load_documents(path)
    assert reader_named("deepspeed").read(docs[0]).fact("world_size") == 2


@pytest.mark.parametrize("value, error", [("null", False), ('"auto"', False), ("4", False), ("0", True), ('"four"', True)])
def test_deepspeed_counts_left_null_are_unset(value, error, tmp_path):
    # DeepSpeed reads a null count as an absent one (and derives it from the other two); 0 or a word fails at start-up
    path = tmp_path / "ds.json"
    path.write_text('{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 16, "gradient_accumulation_steps": %s, '
                    '"bf16": {"enabled": true}}' % value)
    report = lint_config_files([path])
    assert bool(report.errors) == error, report.errors
    assert not [f for f in report.findings if f.severity.value == "error"]


@pytest.mark.parametrize("written, line", [
    ("bnb_4bit_compute_dtype: float16\n", 5),
    ("quantization_config:\n  load_in_4bit: true\n  bnb_4bit_compute_dtype: torch.float32\n", 7),
    ("bnb_config_kwargs:\n  bnb_4bit_compute_dtype: bf16\n", 6),
])
def test_hf_reader_reads_the_4bit_compute_dtype_where_a_config_writes_it(written, line, tmp_path):
    path = tmp_path / "sft.yaml"
    path.write_text("model_name_or_path: m\ntorch_dtype: bfloat16\noutput_dir: out\nper_device_train_batch_size: 2\n" + written)
    docs, error = load_documents(path)
    assert error is None and reader_for(docs[0]) is reader_named("hf")
    reading = reader_named("hf").read(docs[0])
    expected = {"float16": "fp16", "torch.float32": "fp32", "bf16": "bf16"}[written.split(": ")[-1].strip()]
    assert reading.fact("quant_compute_dtype") == expected
    assert reading.locate()("quant_compute_dtype").line == line


def test_hf_reader_takes_model_and_generation_keys_alone_for_no_training_config(tmp_path):
    # A dataset-filtering config beside TRL recipes: the same model-loading keys, but only generation keys with them.
    # It samples from a bf16 model and trains nothing, so no optimizer rounds its updates away (AMP119); one key of
    # the training loop makes it a training config again.
    sampling = ("model_name_or_path: org/model\nmodel_revision: main\ntorch_dtype: bfloat16\n"
                "attn_implementation: flash_attention_2\nnum_generations: 8\ntemperature: 0.7\n")
    path = tmp_path / "filter.yaml"
    path.write_text(sampling)
    docs, error = load_documents(path)
    assert error is None and reader_for(docs[0]) is not reader_named("hf")
    assert not [f for f in lint_config_files([path]).findings if f.rule_id == "AMP119"]
    path.write_text(sampling + "learning_rate: 1.0e-5\n")
    docs, _ = load_documents(path)
    assert reader_for(docs[0]) is reader_named("hf")
    assert [f for f in lint_config_files([path]).findings if f.rule_id == "AMP119"]


def test_deepspeed_keys_none_of_which_deepspeed_could_read_are_another_programs_file(tmp_path):
    """A UI's form defaults (`"train_batch_size": {"value": 5, "min": 1}`) hold DeepSpeed's key names with values of
    no type DeepSpeed takes: another program's file, not a DeepSpeed config with invalid values (input errors on a
    file DeepSpeed never reads are false). One DeepSpeed-typed key is enough for a config with wrong values."""
    form = tmp_path / "defaults.json"
    form.write_text('{"train_batch_size": {"value": 5, "min": 1}, "gradient_accumulation_steps": {"value": 1}}\n')
    docs, _ = load_documents(form)
    assert reader_for(docs[0]) is None
    config = tmp_path / "ds_config.json"
    config.write_text('{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": {"value": 1}}\n')
    docs, _ = load_documents(config)
    assert reader_for(docs[0]) is not None and reader_for(docs[0]).name == "deepspeed"
    assert any("gradient_accumulation_steps" in e.message for e in lint_config_files([config]).errors)


COMPOSER_RUN = """
model:
  name: mpt_causal_lm
train_loader:
  name: text
precision: {precision}
max_duration: 1000ba
global_train_batch_size: 256
"""


@pytest.mark.parametrize("precision, compute, scaler", [("amp_bf16", "bf16", "none"), ("amp_fp16", "fp16", "dynamic"),
                                                          ("fp32", "fp32", "none")])
def test_a_composer_run_config_autocasts_fp32_weights_to_its_precision(precision, compute, scaler, tmp_path):
    path = toml(tmp_path, COMPOSER_RUN.format(precision=precision), "run.yaml")
    [doc] = load_documents(path)[0]
    assert reader_for(doc) is reader_named("composer")
    reading = reader_named("composer").read(doc)
    assert (reading.policy.params, reading.policy.compute, reading.policy.loss_scale) == ("fp32", compute, scaler)
    assert reading.facts.autocast is (compute != "fp32") and reading.locate()("compute").line == 5


def test_a_bare_precision_key_or_an_evaluation_config_is_no_composer_training_run(tmp_path):
    [bare] = load_documents(toml(tmp_path, "precision: amp_bf16\nname: x\n", "bare.yaml"))[0]
    assert reader_for(bare) is not reader_named("composer")
    [evaluation] = load_documents(toml(tmp_path, "precision: amp_bf16\nicl_tasks: tasks.yaml\ndevice_eval_batch_size: 4\n", "eval.yaml"))[0]
    assert reader_for(evaluation) is reader_named("composer")
    assert reader_named("composer").read(evaluation).facts.trains is False


def test_a_projects_own_hyperparameters_naming_train_batch_size_are_no_deepspeed_config(tmp_path):
    """`train_batch_size` is also a name of many programs' own hyperparameter files: beside `learning_rate`, `seed`
    and the datasets, with `"fp16": 0` an apex switch, the file is the project's, not a DeepSpeed config with an
    invalid `fp16` (an input error there is false). The same keys in a file shaped as DeepSpeed's (nothing DeepSpeed
    does not read, or a precision block that is an object) stay DeepSpeed's, and its wrong `fp16` an input error."""
    own = tmp_path / "retrieval.json"
    own.write_text('{"train_datasets": [{"name": "x"}], "train_batch_size": 12, "gradient_accumulation_steps": 1, '
                   '"learning_rate": 4e-5, "seed": 42, "fp16": 0, "num_workers": 4}\n')
    docs, _ = load_documents(own)
    assert reader_for(docs[0]) is None or reader_for(docs[0]).name != "deepspeed"
    assert not lint_config_files([own]).errors
    broken = tmp_path / "ds_config.json"
    broken.write_text('{"train_batch_size": 12, "gradient_accumulation_steps": 1, "fp16": 0}\n')
    docs, _ = load_documents(broken)
    assert reader_for(docs[0]) is not None and reader_for(docs[0]).name == "deepspeed"
    assert any("fp16" in e.message for e in lint_config_files([broken]).errors)
