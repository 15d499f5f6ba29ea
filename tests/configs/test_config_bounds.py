"""Every read has a bound, and values of the wrong type are said, not taken for defaults (issue 11)."""

import json
import os
import subprocess
import sys
import time

from ampdoctor.lint.configs import lint_config_files


def _lint_cli(*paths, timeout=60, cwd=None):
    return subprocess.run([sys.executable, "-m", "ampdoctor", "lint", *map(str, paths)], capture_output=True, text=True, timeout=timeout,
                          cwd=cwd)


def test_a_yaml_alias_bomb_is_refused_fast(tmp_path):
    text = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    prev = "a"
    for name in "bcdefghi":  # 9 levels: 9**9 strings once expanded
        text += f"{name}: &{name} [{', '.join(['*' + prev] * 9)}]\n"
        prev = name
    bomb = tmp_path / "config.yaml"
    bomb.write_text(text)
    start = time.perf_counter()
    proc = _lint_cli(bomb)
    assert time.perf_counter() - start < 30
    assert proc.returncode == 2 and "aliases expand to more" in proc.stdout


def test_a_self_referencing_alias_is_refused(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("a: &a\n  - *a\nbf16: true\n")
    report = lint_config_files([path])
    assert any("aliases expand" in e.message for e in report.errors)


def test_special_files_are_never_opened(tmp_path):
    os.mkfifo(tmp_path / "p.json")  # reading it would block forever
    (tmp_path / "loop.yaml").symlink_to(tmp_path / "loop.yaml")
    (tmp_path / "ds.json").write_text('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}}')
    walked = _lint_cli(tmp_path)  # in a tree: skipped without opening them (the timeout would catch a block)
    assert walked.returncode in (0, 1) and "with errors" not in walked.stdout and "1 checked" in walked.stdout
    named = _lint_cli(tmp_path / "p.json", tmp_path / "loop.yaml")  # named: said why, exit 2
    assert named.returncode == 2
    assert "a named pipe, not a file to lint" in named.stdout and "symbolic links" in named.stdout
    assert "no findings" in named.stdout and "2 inputs with errors" in named.stdout


def test_deepspeed_values_of_the_wrong_type_are_input_errors_at_their_key(tmp_path):
    path = tmp_path / "ds_config.json"
    path.write_text(json.dumps({
        "train_micro_batch_size_per_gpu": 1,
        "bf16": {"enabled": "yes"},  # pydantic, which DeepSpeed validates with, reads "yes" as true: fine
        "gradient_accumulation_steps": "four",
        "fp16": None,
        "data_types": {"grad_accum_dtype": "float128"},
    }, indent=1))
    errors = {e.message.split(":")[0]: e for e in lint_config_files([path]).errors}
    assert set(errors) == {"`gradient_accumulation_steps` is 'four'", "`fp16` is None", "`data_types.grad_accum_dtype` is 'float128'"}
    lines = path.read_text().splitlines()
    assert all('"gradient_accumulation_steps"' in lines[errors[k].line - 1] for k in errors if "gradient" in k)
    assert all(e.fatal for e in errors.values())  # DeepSpeed would refuse the file: the run exits 2


def test_named_files_that_are_neither_python_nor_a_known_config_are_said_unchecked(tmp_path):
    (tmp_path / "notes.txt").write_text("hello\n")
    (tmp_path / "package.json").write_text('{"name": "pkg", "version": "1.0.0"}\n')
    (tmp_path / "ds.json").write_text('{"bf16": {"enabled": true}, "train_micro_batch_size_per_gpu": 1}\n')
    proc = _lint_cli("notes.txt", "package.json", "ds.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.strip().splitlines()
    for name in ("notes.txt", "package.json"):
        assert f"note: {name}: not Python and not a training config ampdoctor recognises" in proc.stdout
    assert "note: ds.json" not in proc.stdout  # recognised and checked
    assert lines[-1].endswith(" in 1 checked; 2 named files not checked")
    # Met while walking a folder, the same files are skipped quietly: a repository holds many such files.
    walked = _lint_cli(".", cwd=tmp_path)
    assert "note:" not in walked.stdout and walked.stdout.strip().splitlines()[-1].endswith(" in 1 checked")


def _hf_args(tmp_path, deepspeed, name="args.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"output_dir": "out", "bf16": True, "per_device_train_batch_size": 4, "deepspeed": deepspeed}, indent=1))
    return path


def _at_deepspeed_key(path, error) -> bool:
    return '"deepspeed"' in path.read_text().splitlines()[error.line - 1]


def test_hf_deepspeed_given_as_a_json_or_base64_string_is_read_as_the_config_it_is(tmp_path):
    import base64

    fp16 = {"fp16": {"enabled": True}, "train_micro_batch_size_per_gpu": "auto"}
    for name, value in (("inline.json", json.dumps(fp16)), ("b64.json", base64.urlsafe_b64encode(json.dumps(fp16).encode()).decode())):
        path = _hf_args(tmp_path, value, name)
        report = lint_config_files([path])
        assert report.errors == ()
        mismatch = [f for f in report.findings if f.rule_id == "AMP001"]
        # bf16=true against the string's fp16 block: the Trainer refuses this at start-up
        assert len(mismatch) == 1 and "runs fp16" in mismatch[0].message, (name, report.findings)


def test_hf_deepspeed_strings_that_are_no_usable_path_are_input_errors_at_their_key(tmp_path):
    cases = {
        "nul.json": ("ds\x00config.json", "`deepspeed` contains a NUL byte"),
        "huge.json": ("x" * 5000, "`deepspeed` is 5000 characters long"),
        "badjson.json": ('{"fp16": {"enabled": ', "`deepspeed` starts with '{' but is not valid JSON"),
        "long.json": ("y" * 300 + "/ds.json", "referenced DeepSpeed config '"),  # a name too long for the file system
    }
    for name, (value, expected) in cases.items():
        path = _hf_args(tmp_path, value, name)
        report = lint_config_files([path])  # never OSError (file name too long) or ValueError (embedded null byte)
        assert len(report.errors) == 1 and report.errors[0].message.startswith(expected), (name, report.errors)
        # a value the trainer refuses fails the run; a referenced file that is not there may lie where the run starts
        assert _at_deepspeed_key(path, report.errors[0]) and report.errors[0].fatal == (name != "long.json")
        assert len(report.errors[0].message) < 400  # the value is cut, never echoed whole
    proc = _lint_cli(tmp_path / "nul.json", tmp_path / "long.json")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr + proc.stdout
