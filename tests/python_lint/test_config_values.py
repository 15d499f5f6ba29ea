"""A dtype read from the run's config object (``DTYPES[cfg.fsdp.reduce_dtype]``) is judged by what the project's
YAML configs write for that key (`lint.python.config_values`), and a re-lint sees a changed config."""

import ast
import pickle
import textwrap
from pathlib import Path

from ampdoctor.core.model import Severity
from ampdoctor.lint.engine import lint_paths
from ampdoctor.lint.python.config_values import ConfigValue, ConfigValues, key_path
from ampdoctor.lint.settings import LintSettings

TRAIN = """
import torch
from torch.distributed.fsdp import MixedPrecision

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def wrap(cfg, configs):
    BEFORE
    return MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=READ)
"""


def project(root: Path, read: str, configs: dict[str, str], before: str = "pass", after: str = "") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "train.py").write_text(textwrap.dedent(TRAIN).replace("READ", read).replace("BEFORE", before) + after)
    for name, text in configs.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))
    return root


def amp118(root: Path, cache: Path | None = None) -> list[tuple[str, str]]:
    report = lint_paths([root], LintSettings(jobs=1, cache=cache))
    return [(f.severity.value, f.message) for f in report.findings if f.rule_id == "AMP118"]


FP32 = "fsdp:\n  reduce_dtype: fp32\n"
BF16 = "fsdp:\n  lr: 1\n  reduce_dtype: bf16\n"


def test_every_config_in_fp32_is_a_note_and_one_in_bf16_a_warning_that_cites_it(tmp_path):
    root = project(tmp_path / "a", "DTYPES[cfg.fsdp.reduce_dtype]", {"configs/base.yaml": FP32, "configs/big.yaml": FP32})
    [(severity, message)] = amp118(root)
    assert severity == Severity.INFO.value and "every YAML config of the project that writes it says float32" in message
    (root / "configs/big.yaml").write_text(BF16)
    [(severity, message)] = amp118(root)
    assert severity == Severity.WARNING.value
    assert "bfloat16 where a run uses the project's config configs/big.yaml:3 (`reduce_dtype: bf16`)" in message


def test_a_relint_sees_the_changed_config(tmp_path):
    root, cache = project(tmp_path / "a", "DTYPES[cfg.fsdp.reduce_dtype]", {"conf.yaml": FP32}), tmp_path / "cache"
    assert [s for s, _ in amp118(root, cache)] == ["info"]
    (root / "conf.yaml").write_text(BF16)  # the Python file is unchanged: its stored result is not the answer
    assert [s for s, _ in amp118(root, cache)] == ["warning"]
    (root / "conf.yaml").write_text(FP32)
    assert [s for s, _ in amp118(root, cache)] == ["info"]


def test_a_config_the_code_also_assigns_and_a_key_of_another_block_keep_the_hedged_warning(tmp_path):
    # the code sets configs["dtype"] itself: the configs are not all that decides it
    after = '\n\ndef setup(configs, args):\n    configs["dtype"] = args.dtype\n'
    root = project(tmp_path / "a", 'DTYPES[configs["dtype"]]', {"c.yaml": "dtype: fp32\n"}, after=after)
    [(severity, message)] = amp118(root)
    assert severity == "warning" and "where the run chooses it" in message
    # `eval.reduce_dtype` is not `fsdp.reduce_dtype`: no config writes the key read
    root = project(tmp_path / "b", "DTYPES[cfg.fsdp.reduce_dtype]", {"c.yaml": "eval:\n  reduce_dtype: fp32\n"})
    [(severity, message)] = amp118(root)
    assert severity == "warning" and "where the run chooses it" in message


def test_a_value_that_is_no_key_of_the_table_is_not_taken_for_fp32(tmp_path):
    root = project(tmp_path / "a", "DTYPES[cfg.fsdp.reduce_dtype]", {"c.yaml": "fsdp:\n  reduce_dtype: ${oc.env:DT}\n",
                                                                      "d.yaml": FP32})
    [(severity, message)] = amp118(root)
    assert severity == "warning" and "where the run chooses it" in message


def test_torch_getattr_of_a_config_value_and_a_name_bound_to_a_lookup(tmp_path):
    root = project(tmp_path / "a", "getattr(torch, cfg.reduce_dtype)", {"c.yaml": "reduce_dtype: bfloat16\n"})
    [(severity, message)] = amp118(root)
    assert severity == "warning" and "c.yaml:1" in message
    root = project(tmp_path / "b", "dt", {"c.yaml": "train:\n  dtype: fp16\n"}, before="dt = DTYPES[cfg.get('train').get('dtype')]")
    [(severity, message)] = amp118(root)
    assert severity == "warning" and "float16 where a run uses the project's config c.yaml:2" in message


def test_key_paths_and_the_longest_suffix_a_config_has():
    def path(text: str):
        return key_path(ast.parse(text, mode="eval").body)

    assert path("cfg.fsdp.reduce_dtype") == ("fsdp", "reduce_dtype")
    assert path("self.cfg.fsdp.reduce_dtype") == ("fsdp", "reduce_dtype")
    assert path("configs['dtype']") == ("dtype",)
    assert path("cfg.optim.get('reduce_dtype', 'fp32')") == ("optim", "reduce_dtype")
    assert path("f(x).reduce_dtype") is None
    values = ConfigValues((ConfigValue(("model", "fsdp", "reduce_dtype"), "bf16", "a.yaml", 3),
                           ConfigValue(("fsdp", "reduce_dtype"), "fp32", "b.yaml", 2),
                           ConfigValue(("eval", "reduce_dtype"), "bf16", "c.yaml", 9)))
    assert [v.file for v in values.lookup(("model", "fsdp", "reduce_dtype"))] == ["a.yaml"]
    assert [v.file for v in values.lookup(("trainer", "fsdp", "reduce_dtype"))] == ["a.yaml", "b.yaml"]
    assert values.lookup(("optim", "reduce_dtype")) == []  # the key's parent must match where the code names one
    assert [v.file for v in values.lookup(("reduce_dtype",))] == ["a.yaml", "b.yaml", "c.yaml"]
    assert repr(values) == repr(ConfigValues(values.values)) and "bf16" not in repr(values)
    # the table travels to the worker processes with each file's context
    again = pickle.loads(pickle.dumps(values))
    assert again == values and [v.file for v in again.lookup(("fsdp", "reduce_dtype"))] == ["a.yaml", "b.yaml"]
