import json
import subprocess
import sys
from pathlib import Path

import pytest

from ampdoctor.core import Location, Severity, finding
from ampdoctor.lint.engine import discover
from ampdoctor.lint.settings import LintSettings, SettingsError, find_pyproject, load_settings, rule_ids
from ampdoctor.report import Report, ReportError
from ampdoctor.report import exit_code as report_exit_code


def write(path: Path, text: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_rule_ids_accept_names_and_ids():
    assert rule_ids(["grad-scaler-with-bf16", "amp005", " "], "--select") == frozenset({"AMP004", "AMP005"})
    assert rule_ids(["ALL"], "--select") == frozenset({"ALL"})
    with pytest.raises(SettingsError, match="--ignore: unknown rule 'typo-rule'"):
        rule_ids(["typo-rule"], "--ignore")


def test_pyproject_settings(tmp_path):
    pyproject = write(tmp_path / "pyproject.toml", '[tool.ampdoctor]\nselect = ["AMP004", "rope-cache-low-precision"]\nignore = "AMP002"\nfail-on = "warning"\nexclude = ["third_party"]\njobs = 1\n')
    s = load_settings(pyproject)
    assert s.select == {"AMP004", "AMP002"} and s.ignore == {"AMP002"}
    assert s.fail_on is Severity.WARNING and s.exclude == ("third_party",) and s.jobs == 1
    assert s.enabled(finding("AMP004", "x")) and not s.enabled(finding("AMP002", "x")) and not s.enabled(finding("AMP005", "x"))


def test_find_pyproject_walks_up(tmp_path):
    pyproject = write(tmp_path / "pyproject.toml", "[project]\nname='x'\n")
    write(tmp_path / "pkg" / "sub" / "train.py")
    assert find_pyproject(tmp_path / "pkg" / "sub" / "train.py") == pyproject
    assert find_pyproject(tmp_path / "pkg") == pyproject
    assert load_settings(pyproject) == LintSettings(root=tmp_path.resolve())


@pytest.mark.parametrize(
    "body, message",
    [
        ("[tool.ampdoctor]\nselct = ['AMP004']\n", "unknown \\[tool.ampdoctor\\] key"),
        ("[tool.ampdoctor]\nfail-on = 'fatal'\n", "fail-on: unknown severity 'fatal'"),
        ("[tool.ampdoctor]\nselect = [1, 2]\n", "expected a list of strings"),
        ("[tool.ampdoctor\n", "cannot read settings"),
        ("[tool.ampdoctor]\njobs = -1\n", "jobs must be a non-negative integer"),
    ],
)
def test_bad_settings_name_the_file(tmp_path, body, message):
    pyproject = write(tmp_path / "pyproject.toml", body)
    with pytest.raises(SettingsError, match=message) as info:
        load_settings(pyproject)
    assert str(pyproject) in str(info.value)


def test_override_ignores_unset_values():
    s = LintSettings(fail_on=Severity.WARNING).override(fail_on=None, select=frozenset({"AMP001"}))
    assert s.fail_on is Severity.WARNING and s.select == {"AMP001"}


def test_discover_walks_and_skips(tmp_path):
    train = write(tmp_path / "train.py")
    ds = write(tmp_path / "configs" / "ds.json", "{}")
    env = write(tmp_path / "config" / "config.env")
    neox = write(tmp_path / "configs" / "neox.yml")
    write(tmp_path / ".venv" / "lib" / "x.py")
    write(tmp_path / "node_modules" / "a.json")
    write(tmp_path / ".hidden" / "b.yaml")
    write(tmp_path / "third_party" / "vendored.py")
    write(tmp_path / "README.md")
    python, configs, missing = discover([tmp_path, tmp_path / "nope.py"], LintSettings(exclude=("third_party",)))
    assert python == [train]
    assert configs == sorted([ds, env, neox])
    assert [(e.file, e.message) for e in missing] == [(str(tmp_path / "nope.py"), "no such file or directory")]


def test_exclude_applies_below_the_folder_named(tmp_path):
    # As ruff: `lint .` skips an excluded folder, naming it (or a folder inside it) lints it.
    inner = write(tmp_path / "examples" / "configs" / "ds.json", "{}")
    settings = LintSettings(exclude=("examples",))
    assert discover([tmp_path], settings)[1] == []
    assert discover([tmp_path / "examples" / "configs"], settings)[1] == [inner]
    assert discover([tmp_path / "examples"], settings)[1] == [inner]


def test_ampdoctor_lints_itself_clean():
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "-m", "ampdoctor", "lint", "--format", "json", "."], cwd=root, capture_output=True, text=True, timeout=240)
    data = json.loads(proc.stdout)
    loud = [f"{f['location']['file']}:{f['location']['line']} {f['id']}" for f in data["findings"] if f["severity"] != "info"]
    assert proc.returncode == 0 and loud == [] and data["errors"] == [], loud or data["errors"]
    assert not any("/tests/" in c or c.startswith(("tests/", "examples/")) for c in data["checked"])


def test_explicit_files_are_always_taken(tmp_path):
    odd = write(tmp_path / "settings.cfg", "")
    python, configs, _ = discover([odd], LintSettings(exclude=("*.cfg",)))
    assert configs == [odd] and python == []


def test_exit_codes():
    s = LintSettings()
    clean = Report(checked=("a.py",))
    warn = Report.of([finding("rope-cache-low-precision", "x", Location(file="a.py", line=1))], checked=("a.py",))
    err = Report.of([finding("grad-scaler-with-bf16", "x", Location(file="a.py", line=1))], checked=("a.py",))
    assert report_exit_code(clean, s.fail_on) == 0
    assert report_exit_code(warn, s.fail_on) == 0 and report_exit_code(warn, s.override(fail_on=Severity.WARNING).fail_on) == 1
    assert report_exit_code(err, s.fail_on) == 1
    assert report_exit_code(Report(errors=(ReportError("ds.json", "bad", 3, 1),), checked=("a.py",)), s.fail_on) == 2
    syntax = ReportError("b.py", "syntax error", 1, 1, fatal=False)
    assert report_exit_code(Report(errors=(syntax,), checked=("a.py", "b.py")), s.fail_on) == 0
    assert report_exit_code(Report(errors=(syntax,)), s.fail_on) == 2
    assert report_exit_code(Report(errors=(syntax,), checked=("b.py",)), s.fail_on) == 2


def test_large_data_files_are_not_config_candidates_unless_named(tmp_path):
    from ampdoctor.lint.engine import MAX_CONFIG_BYTES

    config = write(tmp_path / "ds_config.json", '{"bf16": {"enabled": true}}')
    tokenizer = write(tmp_path / "tokenizer.json", '{"vocab": "' + "x" * MAX_CONFIG_BYTES + '"}')
    _, configs, _ = discover([tmp_path], LintSettings())
    assert configs == [config]
    _, configs, _ = discover([tokenizer], LintSettings())
    assert configs == [tokenizer]
