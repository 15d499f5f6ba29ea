"""`ampdoctor lint --fix` / `--diff`: each registered rewrite turns its before fixture into its after fixture exactly
(formatting and comments kept), the result parses and re-lints clean for the rule, a suppressed finding is left
alone, `--diff` changes nothing and exits 1, and a file that does not parse is never touched."""

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ampdoctor.core.model import Finding
from ampdoctor.core.registry import fixes
from ampdoctor.lint.python import lint_source
from ampdoctor.lint.rewrite import rewrites

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
    proc = ampdoctor("--fix", "--exit-zero", "--select", rule_id, str(target))  # the rule's own rewrite, alone
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
    proc = ampdoctor("--diff", "--select", "AMP108", str(target))
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


def fix_tree(tmp_path: Path, rule_id: str, files: dict[str, str], *target: str) -> tuple[list[int], dict[str, str]]:
    """Write a project, lint it for one rule (the lines found in the first file) and `--fix` it: what each file
    then holds. A "don't rewrite" case must still be found, or it would prove nothing."""
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    where = [str(tmp_path / t) for t in target] or [str(tmp_path)]
    report = json.loads(ampdoctor("--format", "json", "--exit-zero", "--select", rule_id, *where).stdout)
    first = str(tmp_path / next(iter(files)))
    found = [f["location"]["line"] for f in report["findings"] if f["location"]["file"] == first]
    proc = ampdoctor("--fix", "--exit-zero", "--select", rule_id, *where)
    assert "Traceback" not in proc.stderr
    return found, {name: (tmp_path / name).read_text() for name in files}


ROTARY = '''import torch
from torch import nn


class Rotary(nn.Module):
    def __init__(self, dim, n=2048):
        super().__init__()
        inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
        freqs = torch.outer(torch.arange(n).float(), inv_freq)
        self.cos_cached = freqs.cos().bfloat16()
        self.sin_cached = freqs.sin().bfloat16()

    def forward(self, x):
        n = x.shape[-2]
        return self.cos_cached[:n].to(x.dtype), {sin}
'''


def test_amp002_drops_the_cast_only_where_every_read_casts(tmp_path):
    found, after = fix_tree(tmp_path, "AMP002", {"rotary.py": ROTARY.replace("{sin}", "self.sin_cached[:n].type_as(x)")})
    assert found == [10, 11]
    assert "self.cos_cached = freqs.cos()\n" in after["rotary.py"] and "self.sin_cached = freqs.sin()\n" in after["rotary.py"]
    # read as it is stored: the cast decides what the consumer computes in (an fp32 table would promote it)
    source = ROTARY.replace("{sin}", "self.sin_cached[:n]")
    found, after = fix_tree(tmp_path, "AMP002", {"rotary.py": source})
    assert found == [10, 11]
    assert after["rotary.py"] == source.replace("freqs.cos().bfloat16()", "freqs.cos()")


def test_a_rewrite_names_the_rules_that_changed_the_file(tmp_path):
    source = SCALER.format(dtype="use_fp16 = False", amp="torch.bfloat16").replace("torch.autocast(\"cuda\", ", "torch.cuda.amp.autocast(")
    (tmp_path / "train.py").write_text(source)
    report = json.loads(ampdoctor("--format", "json", "--exit-zero", str(tmp_path / "train.py")).stdout)
    assert {"AMP004", "AMP108"} <= {f["id"] for f in report["findings"]}
    found = rewrites(Finding.from_dict(f) for f in report["findings"])
    assert [rw.rules for rw in found] == [("AMP108",)]  # the scaler's dtype is not known: AMP004's rewrite does nothing


SCALER = '''import torch

{dtype}
model = torch.nn.Linear(4, 4).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cuda")
for x in range(3):
    with torch.autocast("cuda", dtype={amp}):
        loss = model(x).sum()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
'''


@pytest.mark.parametrize("dtype, amp, gate", [
    ("", "torch.bfloat16", "False"),  # bf16 is all the file runs in: the scaler is off
    ("amp_dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16", "amp_dtype", "(amp_dtype == torch.float16)"),
    # don't rewrite: a dtype the code does not show (a helper's result; a string, never equal to torch.float16)
    ("amp_dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else pick_dtype()", "amp_dtype", None),
    ("amp_dtype = torch.bfloat16\nname = 'bfloat16'", "getattr(torch, name)", None),
    # don't rewrite: bf16 only named, while the file may run fp16 too (a literal bf16 beside a switch)
    ("use_fp16 = False", "torch.bfloat16", None),
])
def test_amp004_gates_the_scaler_only_on_a_dtype_it_knows(tmp_path, dtype, amp, gate):
    source = SCALER.format(dtype=dtype, amp=amp)
    found, after = fix_tree(tmp_path, "AMP004", {"train.py": source})
    assert found == [6 + dtype.count("\n")]
    want = source if gate is None else source.replace('GradScaler("cuda")', f'GradScaler("cuda", enabled={gate})')
    assert after["train.py"] == want


MODEL = '''import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        with torch.cuda.amp.autocast():
            return self.proj(x)
'''

TRAIN = '''import torch

from model import Net

model = Net().cuda()
optimizer = torch.optim.AdamW(model.parameters())
for x in range(10):
    with torch.autocast("cuda", dtype={dtype}):
        loss = model(x).sum()
    loss.backward()
    optimizer.step()
'''


@pytest.mark.parametrize("trainers, fixed", [
    ({"train.py": "torch.bfloat16"}, True),
    # mixed: another trainer runs the same model in fp16
    ({"train.py": "torch.bfloat16", "train_fp16.py": "torch.float16"}, False),
    # unknown: the trainer's dtype is chosen at run time
    ({"train.py": '{"bf16": torch.bfloat16, "fp16": torch.float16}[args.precision]'}, False),
])
def test_amp107_adds_bf16_only_where_the_project_runs_only_bf16(tmp_path, trainers, fixed):
    files = {"model.py": MODEL, **{name: TRAIN.format(dtype=d) for name, d in trainers.items()}}
    found, after = fix_tree(tmp_path, "AMP107", files)
    assert found == [11]
    want = MODEL.replace('autocast()', 'autocast(dtype=torch.bfloat16)') if fixed else MODEL
    assert after["model.py"] == want
    # torch.autocast without a dtype, made inside the trainer's autocast, takes its dtype: nothing to find
    inheriting = MODEL.replace("torch.cuda.amp.autocast()", 'torch.autocast("cuda")')
    assert fix_tree(tmp_path, "AMP107", {**files, "model.py": inheriting})[0] == []
    # named alone, the model file says no precision: nothing is found, nothing rewritten
    (tmp_path / "model.py").write_text(MODEL)
    assert fix_tree(tmp_path, "AMP107", {"model.py": MODEL}, "model.py") == ([], {"model.py": MODEL})


def test_amp107_leaves_a_file_ready_for_fp16(tmp_path):
    source = '''import torch

model = torch.nn.Linear(4, 4).cuda().to(torch.bfloat16)
scaler = torch.amp.GradScaler("cuda", enabled=False)
with torch.autocast("cuda"):
    loss = model(torch.ones(4)).sum()
'''
    found, after = fix_tree(tmp_path, "AMP107", {"train.py": source})
    assert found == [5]
    assert after["train.py"] == source
