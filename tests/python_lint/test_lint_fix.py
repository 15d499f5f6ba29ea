"""`ampdoctor lint --fix` / `--diff`: each registered rewrite turns its before fixture into its after fixture exactly
(formatting and comments kept), the result parses and re-lints clean for the rule, a suppressed finding is left
alone, `--diff` changes nothing and exits 1, and a file that does not parse is never touched."""

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ampdoctor.core.registry import fixes
from ampdoctor.lint.python import lint_source

FIXES = Path(__file__).parent / "fixes"


def ampdoctor(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ampdoctor", "lint", "--no-config", "--no-cache", *args],
                          capture_output=True, text=True)


def test_every_registered_fix_has_a_before_and_after_fixture():
    assert sorted(fixes()) == sorted(p.name for p in FIXES.iterdir() if p.is_dir())


@pytest.mark.parametrize("rule_id", sorted(p.name for p in FIXES.iterdir() if p.is_dir()))
def test_fix_turns_before_into_after_and_relints_clean(rule_id, tmp_path):
    target = tmp_path / "train.py"
    shutil.copy(FIXES / rule_id / "before.py", target)
    proc = ampdoctor("--fix", "--exit-zero", str(target))
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    after = target.read_text()
    assert after == (FIXES / rule_id / "after.py").read_text()
    ast.parse(after)
    found, error = lint_source(after, str(target))
    assert error is None
    # what the fix leaves on purpose is marked "stays" in the fixture (a fallback for old torch under a version test)
    lines = after.splitlines()
    assert [f.location.line for f in found if f.rule_id == rule_id and "stays" not in lines[f.location.line - 1]] == []


def test_diff_prints_and_changes_nothing(tmp_path):
    target = tmp_path / "train.py"
    shutil.copy(FIXES / "AMP108" / "before.py", target)
    before = target.read_text()
    proc = ampdoctor("--diff", str(target))
    assert proc.returncode == 1
    assert '+    scaler = torch.amp.GradScaler("cuda", 2.0**16, enabled=use_amp)  # the scale is kept' in proc.stdout
    assert target.read_text() == before
    clean = tmp_path / "clean.py"
    clean.write_text("import torch\n")
    assert ampdoctor("--diff", str(clean)).returncode == 0


def test_a_file_that_does_not_parse_is_never_rewritten(tmp_path):
    target = tmp_path / "broken.py"
    target.write_text("import torch\nwith torch.cuda.amp.autocast(:\n    pass\n")
    before = target.read_text()
    ampdoctor("--fix", "--exit-zero", str(target))
    assert target.read_text() == before
