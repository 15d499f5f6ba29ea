"""Suppression, syntax errors, parallel runs, and the `ampdoctor lint` command on Python files."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from pylint_helpers import hits

from ampdoctor.lint import LintSettings, lint_paths
from ampdoctor.lint.python import lint_python_files
from ampdoctor.report import exit_code

BUGGY = textwrap.dedent("""
    import torch
    scaler = torch.cuda.amp.GradScaler()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        pass
""").lstrip()


def test_inline_suppression_by_name_id_and_bare():
    code = """
    import torch
    a = torch.amp.GradScaler("cuda")  # ampdoctor: ignore[grad-scaler-with-bf16]
    b = torch.amp.GradScaler("cuda")  # ampdoctor: ignore[AMP004, deprecated-cuda-amp]
    c = torch.cuda.amp.GradScaler()  # ampdoctor: ignore
    d = torch.cuda.amp.GradScaler()  # ampdoctor: ignore[deprecated-cuda-amp]
    e = "# ampdoctor: ignore"; f = torch.amp.GradScaler("cuda")
    x = torch.ones(1, dtype=torch.bfloat16)
    """
    assert hits(code) == [("grad-scaler-with-bf16", 5), ("grad-scaler-with-bf16", 6)]


def test_syntax_error_is_reported_for_that_file_and_the_run_goes_on(tmp_path: Path):
    (tmp_path / "broken.py").write_text("def f(:\n    pass\n")
    (tmp_path / "train.py").write_text(BUGGY)
    report = lint_paths([tmp_path], LintSettings(jobs=1))
    assert [(e.file.endswith("broken.py"), e.line, e.fatal) for e in report.errors] == [(True, 1, True)]
    assert report.errors[0].message.startswith("syntax error")
    assert sorted((f.name, f.location.line) for f in report.findings) == [("deprecated-cuda-amp", 2), ("grad-scaler-with-bf16", 2)]
    assert len(report.checked) == 2
    assert exit_code(report, LintSettings().fail_on) == 2  # the other file's findings are reported; the run fails


def test_a_broken_file_exits_2_beside_readable_ones_too(tmp_path: Path):
    (tmp_path / "broken.py").write_bytes(b"x = (\n")
    report = lint_paths([tmp_path / "broken.py"], LintSettings(jobs=1))
    assert report.errors and not report.findings
    assert exit_code(report, LintSettings().fail_on) == 2  # the only file checked could not be parsed
    (tmp_path / "fine.py").write_text("x = 1\n")
    report = lint_paths([tmp_path / "broken.py", tmp_path / "fine.py"], LintSettings(jobs=1))
    assert [e.fatal for e in report.errors] == [True] and len(report.checked) == 2
    assert exit_code(report, LintSettings().fail_on) == 2  # as ruff: the readable file is checked, the run still fails
    undecodable = tmp_path / "latin.py"
    undecodable.write_bytes(b"# -*- coding: utf-8 -*-\nx = '\xff'\n")
    report = lint_paths([undecodable], LintSettings(jobs=1))
    assert report.errors[0].message.startswith("cannot read") and not report.checked
    assert exit_code(report, LintSettings().fail_on) == 2


def test_parallel_and_serial_runs_agree(tmp_path: Path):
    for i in range(40):
        (tmp_path / f"m{i:02d}.py").write_text(BUGGY if i % 3 == 0 else "import torch\nx = torch.ones(3)\n")
    files = sorted(tmp_path.glob("*.py"))
    serial = lint_python_files(files, jobs=1)
    parallel = lint_python_files(files, jobs=2)
    assert parallel.findings == serial.findings
    assert sorted(parallel.checked) == sorted(serial.checked) and len(serial.checked) == 40
    assert len(serial.findings) == 2 * 14


def test_cli_json_select_ignore(tmp_path: Path):
    (tmp_path / "train.py").write_text(BUGGY)
    cmd = [sys.executable, "-m", "ampdoctor", "lint", str(tmp_path), "--no-config", "--format", "json"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    assert out.returncode == 1, out.stderr
    names = sorted((f["name"], f["location"]["line"]) for f in json.loads(out.stdout)["findings"])
    assert names == [("deprecated-cuda-amp", 2), ("grad-scaler-with-bf16", 2)]
    only = subprocess.run(cmd + ["--select", "deprecated-cuda-amp"], capture_output=True, text=True)
    assert [f["name"] for f in json.loads(only.stdout)["findings"]] == ["deprecated-cuda-amp"]
    assert only.returncode == 0  # a warning does not fail at the default fail-on=error
    none = subprocess.run(cmd + ["--ignore", "AMP004,deprecated-cuda-amp"], capture_output=True, text=True)
    assert json.loads(none.stdout)["findings"] == [] and none.returncode == 0


def test_examples_reproduce_incidents_2_to_5():
    root = Path(__file__).resolve().parents[2] / "examples" / "code"
    report = lint_paths([root], LintSettings(jobs=1))
    got = sorted((Path(f.location.file).name, f.name, f.location.line) for f in report.findings)
    assert got == [
        ("incident2_rope_cache.py", "rope-cache-low-precision", 22),
        ("incident2_rope_cache.py", "rope-cache-low-precision", 23),
        ("incident3_grad_precision.py", "grad-dtype-mismatch", 19),
        ("incident4_gradscaler.py", "deprecated-cuda-amp", 6),
        ("incident4_gradscaler.py", "grad-scaler-with-bf16", 15),
        ("incident5_rotary_cast.py", "rope-dtype-mismatch", 13),
    ]


def test_cycle_collector_state_is_restored_after_linting(tmp_path):
    import gc

    from ampdoctor.lint.python import lint_python_files

    source = tmp_path / "train.py"
    source.write_text("import torch\nscaler = torch.cuda.amp.GradScaler()\n")
    assert gc.isenabled()
    lint_python_files([source], jobs=1)
    assert gc.isenabled()
    gc.disable()
    try:
        lint_python_files([source], jobs=1)
        assert not gc.isenabled()
    finally:
        gc.enable()


NEWER_SYNTAX = {
    "multiline_fstring.py": 'name = "x"\nprint(\n    f"saving {\n        name}"\n)\n',
    "reused_quotes.py": 'd = {"a": 1}\nprint(f"{d["a"]}")\n',
    "type_params.py": "def first[T](xs: list[T]) -> T:\n    return xs[0]\n",
}


def test_python_3_12_syntax_is_a_note_not_an_input_error(tmp_path: Path):
    # A project that requires Python 3.12 may use PEP 701 f-strings or PEP 695 type parameters; an older interpreter
    # cannot parse them, which says nothing against the file: it is left unchecked with a note, not a syntax error.
    for name, text in NEWER_SYNTAX.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "broken.py").write_text('s = "abc\nx = (\n')
    (tmp_path / "unclosed_fstring.py").write_text('x = F"\n')  # broken in every version: no field left open
    report = lint_paths([tmp_path], LintSettings(jobs=1))
    assert sorted(Path(e.file).name for e in report.errors) == ["broken.py", "unclosed_fstring.py"]
    assert all(e.message.startswith("syntax error") for e in report.errors)
    if sys.version_info >= (3, 12):
        assert len(report.checked) == 5 and not report.info.get("notes")
        return
    assert len(report.checked) == 2
    notes = report.info["notes"]
    assert sorted(Path(n.split(":")[0]).name for n in notes) == sorted(NEWER_SYNTAX)
    assert all("Python 3.12+" in n and "not checked" in n for n in notes)
    assert report.info["summary_caveats"] == ["3 files not checked: Python 3.12+ syntax (lint them with Python 3.12+)"]


def test_what_the_compiler_warns_of_in_a_linted_file_is_not_printed(tmp_path: Path):
    # `1if x else 0` and an invalid escape make Python warn while it parses; a linter's output is its report alone
    (tmp_path / "odd.py").write_text('import torch\nx = 1 if 1else 0\npattern = "\\d+"\ny = torch.ones(2).half()\n')
    for jobs in ("1", "2"):
        out = subprocess.run([sys.executable, "-W", "default", "-m", "ampdoctor", "lint", str(tmp_path), "--no-config",
                              "--no-cache", "-j", jobs], capture_output=True, text=True)
        assert out.returncode == 0 and "Warning" not in out.stderr + out.stdout, out.stderr
