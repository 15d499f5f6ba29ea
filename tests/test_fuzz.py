"""Structure-aware fuzzing of the config readers and the CLI (issue 11), a few hundred inputs per CI run (bench/fuzz.py
runs tens of thousands): every framework's key schema with values of the wrong type, aliases and merge keys, odd
file kinds, odd argument vectors. No input may raise, hang (over fuzzgen.BOUND_S seconds), give an input error that
names no file or echoes a huge value, or make the CLI exit outside 0/1/2 or print a traceback. The regression tests
below are the minimal reproductions of what the fuzzer found."""

from __future__ import annotations

import json
import os
import time

import pytest
from fuzzgen import GENERATORS, Hang, run_case, time_bound
from hypothesis import HealthCheck, given, settings

from ampdoctor._quote import quoted
from ampdoctor.cli import main
from ampdoctor.lint.configs import lint_config_files

# Examples per generator in CI: 12 config readers + env files at 20, trees and the CLI at 40: about 340 inputs.
EXAMPLES = {name: (40 if name in ("tree", "cli") else 20) for name in GENERATORS}
CI = settings(deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_generated_inputs_never_raise_hang_or_mislead(name, tmp_path_factory):
    @settings(CI, max_examples=EXAMPLES[name])
    @given(GENERATORS[name]())
    def check(case):
        outcome = run_case(case, tmp_path_factory.mktemp("case"))
        assert outcome.ok, outcome.describe(case)

    check()


def test_the_time_bound_interrupts_a_hang():
    start = time.monotonic()
    with pytest.raises(Hang), time_bound(0.2):
        time.sleep(5)
    assert time.monotonic() - start < 2


# --- what the fuzzer found --------------------------------------------------------------------------


def test_a_huge_deepspeed_value_is_quoted_cut_at_its_key(tmp_path):
    path = tmp_path / "ds_config.json"
    path.write_text(json.dumps({"train_micro_batch_size_per_gpu": "x" * 5000, "bfloat16": ["\x00" * 5000], "fp16": {"enabled": "y" * 999},
                                "data_types": {"grad_accum_dtype": "z" * 4097}}, indent=1))
    errors = lint_config_files([path]).errors
    assert len(errors) == 4
    for error in errors:
        assert len(error.message) < 300 and error.line is not None, error  # was: the whole value, 5,000+ characters
    assert any("... (5000 characters)" in e.message for e in errors)


def test_a_pyproject_whose_tool_is_no_table_is_a_usage_error(tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_text("tool = 3\n")
    (tmp_path / "ds_config.json").write_text('{"train_micro_batch_size_per_gpu": 1}')
    assert main(["lint", str(tmp_path)]) == 2  # was: AttributeError: 'int' object has no attribute 'get'
    err = capsys.readouterr().err
    assert "pyproject.toml: `tool` must be a table, got 3" in err and "Traceback" not in err


def test_an_unprintable_character_in_yaml_is_an_input_error_with_its_line(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("trainer:\n  precision: bf16\x84-mixed\n")
    (error,) = lint_config_files([path]).errors
    # was: "cannot parse yaml: ReaderError: ...\n  in "<unicode string>", position 29", no line
    assert error.message == "invalid YAML: character U+0084 is not allowed in YAML (unprintable)"
    assert (error.line, error.column) == (2, 18)


def test_config_files_that_are_no_regular_files_are_never_opened(tmp_path):
    os.mkfifo(tmp_path / "pipe.json")  # opening it blocks until a writer comes
    (tmp_path / "dir.json").mkdir()
    (tmp_path / "loop.yaml").symlink_to(tmp_path / "loop.yaml")
    named = [tmp_path / "pipe.json", tmp_path / "dir.json", tmp_path / "loop.yaml", tmp_path / "x\x00.json"]
    with time_bound(10):  # was: lint_config_files blocked forever on the FIFO
        report = lint_config_files(named)
    messages = {os.path.basename(e.file): e.message for e in report.errors}
    assert messages["pipe.json"] == "a named pipe, not a config file; not read"
    assert messages["dir.json"] == "a directory, not a config file; not read"
    assert messages["loop.yaml"].startswith("cannot read: ")
    assert messages["x\x00.json"].startswith("cannot read: ")  # was: ValueError: embedded null byte


def test_quoted_cuts_long_values_and_says_their_size():
    assert quoted("bf16") == "'bf16'"
    assert quoted("x" * 5000) == repr("x" * 120) + "... (5000 characters)"
    assert len(quoted("\x00" * 5000)) < 140  # escapes count against the limit
    assert quoted(list(range(1000))).endswith("... (list, 1000 items)")


def test_non_finite_and_huge_numbers_where_a_precision_goes_are_judged_not_crashed_on(tmp_path):
    cases = {
        "litgpt.yaml": "precision: -.inf\ncheckpoint_dir: checkpoints/x\ndevices: 1\n",  # was: OverflowError (traceback)
        "lightning.yaml": "trainer:\n  precision: .nan\n",  # was: "cannot interpret this lightning config: ValueError: ..."
        "tune.yaml": "dtype: 1" + "0" * 400 + "\nmodel:\n  _component_: torchtune.models.x\noptimizer:\n  _component_: torch.optim.AdamW\n",
    }
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        report = lint_config_files([tmp_path / name])  # was: OverflowError: int too large to convert to float (tune.yaml)
        assert report.errors == (), (name, report.errors)
        assert any(f.location.file == str(tmp_path / name) and f.location.line == 1 + (name == "lightning.yaml") for f in report.findings), name


def test_odd_names_given_to_the_cli_are_usage_errors(tmp_path, capsys):
    (tmp_path / "ds.json").write_text('{"train_micro_batch_size_per_gpu": 1}')
    os.mkfifo(tmp_path / "pipe.json")
    long = str(tmp_path / ("n" * 300))  # longer than a file name may be
    cases = [  # each was a traceback (OSError: File name too long, ValueError: embedded null byte) or a block on the FIFO
        (["lint", long], f"{long}: cannot be read: File name too long"),
        (["lint", "--config", long, str(tmp_path / "ds.json")], f"--config {long}: no such file"),
        (["lint", "--write-baseline", long, str(tmp_path / "ds.json")], "cannot write baseline"),
        (["lint", "--write-baseline", "\x00", str(tmp_path / "ds.json")], "embedded null byte"),
        (["lint", "--write-baseline", str(tmp_path / "pipe.json"), str(tmp_path / "ds.json")], "pipe.json: not a regular file"),
        (["lint", "--baseline", long, str(tmp_path / "ds.json")], "no such file (record one with --write-baseline"),
        (["lint", "--baseline", "\x00", str(tmp_path / "ds.json")], "no such file"),
        (["lint", "--baseline", str(tmp_path / "pipe.json"), str(tmp_path / "ds.json")], "pipe.json: not a regular file"),
        (["explain", "--file", "\x00"], "cannot read '\\x00'"),
        (["explain", "--output", "\x00", "loss is nan"], "cannot write '\\x00'"),
    ]
    for argv, expected in cases:
        with time_bound(20):
            assert main(argv) == 2, argv
        out = capsys.readouterr()
        assert expected in out.out + out.err and "Traceback" not in out.out + out.err, (argv, out)
