"""Configs written in Python: read by the framework readers into the readings config files give, judged by the
policy rules at the Python lines, silent where the code does not fix a value."""

import textwrap
from pathlib import Path

from pylint_helpers import hits

from ampdoctor.lint import LintSettings, lint_paths
from ampdoctor.lint.python import lint_source
from ampdoctor.lint.python.context import Context
from ampdoctor.lint.python.embedded import embedded_configs, embedded_readings
from ampdoctor.lint.python.source import SourceFile


def context(code: str, path: str = "train.py") -> Context:
    return Context(SourceFile.parse(path, textwrap.dedent(code).lstrip("\n")))


def test_training_arguments_give_the_reading_their_yaml_gives():
    ctx = context("""
    from transformers import TrainingArguments
    args = TrainingArguments(output_dir="out", bf16=True, gradient_accumulation_steps=4)
    """)
    (reading,) = embedded_readings(ctx)
    assert reading.framework == "hf-trainer"
    assert str(reading.policy).startswith("params=fp32,compute=bf16")
    assert reading.fact("grad_accum_steps") == 4
    assert (reading.settings["grad_accum_steps"].location.line, reading.settings["grad_accum_steps"].location.column) == (2, 55)
    assert embedded_readings(ctx) is embedded_readings(ctx)  # computed once per file


def test_each_framework_is_recognised_by_what_the_call_resolves_to():
    ctx = context("""
    import torch
    import deepspeed
    from accelerate import Accelerator
    from pytorch_lightning import Trainer
    from torch.distributed.fsdp import MixedPrecisionPolicy
    from trl import SFTConfig
    Accelerator(mixed_precision="bf16")
    Trainer(precision="16-mixed")
    MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    SFTConfig(output_dir="o", fp16=True)
    deepspeed.initialize(model=None, config={"bf16": {"enabled": True}, "zero_optimization": {"stage": 3}})
    """)
    assert [(r.framework, r.policy.compute if r.policy else None) for r in embedded_readings(ctx)] == [
        ("accelerate", "bf16"), ("lightning", "fp16"), ("fsdp", "bf16"), ("hf-trainer", "fp16"), ("deepspeed", "bf16")]


def test_a_local_trainer_class_is_not_lightning():
    assert embedded_configs(context("""
    class Trainer:
        def __init__(self, precision): ...
    Trainer(precision="bf16-true")
    """)) == []


def test_names_resolve_only_through_one_literal_assignment():
    ctx = context("""
    from transformers import TrainingArguments
    HALF = "fp16"
    mode = True
    if cli:
        mode = False
    TrainingArguments(output_dir="o", fp16=mode, bf16=True, torch_dtype=HALF)
    """)
    (config,) = embedded_configs(ctx)
    assert config.document.data == {"output_dir": "o", "bf16": True, "torch_dtype": "fp16"}
    assert list(config.unknown) == [("fp16",)]


def test_a_finding_names_the_python_line_and_can_be_suppressed():
    code = """
    from transformers import TrainingArguments
    a = TrainingArguments(output_dir="o", fp16=True, bf16=True)
    b = TrainingArguments(output_dir="o", fp16=True, bf16=True)  # ampdoctor: ignore[fp16-bf16-both-enabled]
    """
    assert hits(code) == [("fp16-bf16-both-enabled", 2)]
    findings, _ = lint_source(textwrap.dedent(code).lstrip("\n"), "train.py")
    assert findings[0].message.endswith("(written in Python: TrainingArguments(...) at train.py:2)")


def test_an_unknown_value_that_decides_the_rule_gives_no_finding():
    assert hits("""
    from transformers import TrainingArguments
    args = TrainingArguments(output_dir="o", fp16=True, bf16=load_flag())
    """) == []


def test_test_code_and_unfinished_dicts_are_not_configs():
    code = """
    import deepspeed
    from transformers import TrainingArguments
    def test_refused():
        TrainingArguments(output_dir="o", fp16=True, bf16=True)
    config = load()
    config["bf16"] = {"enabled": True}
    deepspeed.initialize(model=None, config=config)
    """
    assert hits(code) == []
    findings, _ = lint_source(textwrap.dedent(code).lstrip("\n").replace("def test_refused", "def build"), "test_args.py")
    assert findings == []


def test_files_without_a_precision_word_are_not_searched():
    assert embedded_configs(context("from transformers import TrainingArguments\nTrainingArguments(output_dir='o')\n")) == []


def test_python_configs_are_linted_in_worker_processes(tmp_path: Path):
    for i in range(30):
        (tmp_path / f"train_{i}.py").write_text("from transformers import TrainingArguments\n"
                                                 "args = TrainingArguments(output_dir='o', fp16=True, bf16=True)\n")
    report = lint_paths([tmp_path], LintSettings(jobs=2))
    assert sorted((Path(f.location.file).name, f.rule_id, f.location.line) for f in report.findings) == sorted(
        (f"train_{i}.py", "AMP115", 2) for i in range(30))


def test_an_accelerator_without_mixed_precision_leaves_it_to_the_launcher():
    (config,) = embedded_configs(context("""
    from accelerate import Accelerator
    accelerator = Accelerator(gradient_accumulation_steps=4)  # bf16 from the launcher
    """))
    assert list(config.unknown) == [("mixed_precision",)]
    assert embedded_configs(context("from accelerate import Accelerator\nAccelerator()  # half\n")) == []


def test_a_branch_that_never_runs_holds_no_config():
    assert embedded_configs(context("""
    from transformers import TrainingArguments
    if False:
        TrainingArguments(output_dir="o", fp16=True, bf16=True)
    """)) == []


def test_a_dataclass_is_hf_arguments_only_with_keys_of_hf_alone():
    code = """
    from dataclasses import dataclass
    @dataclass
    class CommonOptions:
        seed: int = 1
        fp16: bool = True
        bf16: bool = True
        tf32: bool = False
        max_steps: int = 10
        {extra}
    """
    assert embedded_configs(context(code.replace("{extra}", ""))) == []
    (config,) = embedded_configs(context(code.replace("{extra}", "per_device_train_batch_size: int = 8")))
    assert config.reader.name == "hf-trainer" and config.what == "class CommonOptions"


def test_a_parameter_default_or_an_assignment_under_a_branch_is_not_the_value():
    ctx = context("""
    from transformers import TrainingArguments
    def build(cli, bf16=True):
        if cli.fast:
            cli.fp16 = True
        return TrainingArguments(output_dir="o", bf16=bf16, fp16=cli.fp16)
    """)
    (config,) = embedded_configs(ctx)
    assert sorted(config.unknown) == [("bf16",), ("fp16",)]


def test_a_dict_changed_otherwise_than_key_by_key_is_not_read():
    code = """
    import deepspeed
    ds_config = {"gradient_accumulation_steps": 8, "bf16": {"enabled": True}, "zero_optimization": {"stage": 1}}
    {change}
    print(ds_config.get("bf16"))
    deepspeed.initialize(model=None, config=ds_config)
    """
    assert hits(code.replace("{change}", "")) == [("bf16-grad-accumulation", 2)]
    for change in ('ds_config.update(data_types={"grad_accum_dtype": "fp32"})', "add_fp32_accumulation(ds_config)",
                   'ds_config[key] = {"grad_accum_dtype": "fp32"}', 'ds_config["bf16"].pop("enabled")'):
        assert hits(code.replace("{change}", change)) == [], change


def test_a_load_dtype_field_of_a_trainingarguments_subclass_is_the_projects_own():
    # the subclass adds `dtype`: what it means is up to the project's code (here the mixed precision), not a load dtype
    ctx = context("""
    from dataclasses import dataclass
    from transformers import TrainingArguments
    @dataclass
    class RunArguments(TrainingArguments):
        bf16: bool = False
        dtype: str = "bfloat16"
    """)
    (reading,) = embedded_readings(ctx)
    assert reading.policy is not None and str(reading.policy.params) == "fp32"
