"""A recording without an optimizer step says what it could not check, instead of a bare "no findings" (issue 11)."""

import os
import subprocess
import sys

import torch

import ampdoctor
from ampdoctor.audit.session import audit_step
from ampdoctor.report import render_text

NO_STEP = ("no optimizer step was seen: only the forward and backward ops recorded were checked; the parameter update, "
           "the optimizer's state dtypes and gradient accumulation across micro-batches were not")


def _last_line(report) -> str:
    return render_text(report, width=400).strip().splitlines()[-1]


def test_a_step_without_optimizer_says_so_in_the_report_and_the_summary():
    model = torch.nn.Linear(4, 4)
    a = audit_step(model, torch.randn(2, 4), loss_fn=lambda out, _: out.float().sum(), policy="fp32")
    assert a.report.findings == ()
    assert a.report.info["notes"] == [NO_STEP]
    text = render_text(a.report, width=400)
    assert f"note: {NO_STEP}" in text
    assert _last_line(a.report) == "no findings in 1 checked; no optimizer step was seen"


def test_forward_only_and_empty_recordings_say_what_ran():
    model = torch.nn.Linear(4, 4)
    with torch.no_grad(), ampdoctor.audit("fp32") as fwd:
        model(torch.randn(2, 4))
    assert fwd.report.info["notes"][0].startswith("no optimizer step was seen (and no backward pass): only the forward ops recorded")
    with ampdoctor.audit("fp32") as empty:
        pass
    assert empty.report.info["summary_caveats"] == ["no op was recorded"]
    assert _last_line(empty.report) == "no findings in 1 checked; no op was recorded"


def test_a_full_step_has_no_note():
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    a = audit_step(model, torch.randn(2, 4), loss_fn=lambda out, _: out.float().sum(), optimizer=opt, policy="fp32")
    assert "notes" not in a.report.info
    assert _last_line(a.report) == "no findings in 1 checked"


def test_run_of_a_script_without_a_training_step_says_so(tmp_path):
    script = tmp_path / "forward.py"
    script.write_text("import torch\nm = torch.nn.Linear(4, 4)\nm(torch.randn(2, 4)).sum().backward()\n")
    env = {**os.environ, "COLUMNS": "400"}
    proc = subprocess.run([sys.executable, "-m", "ampdoctor", "run", str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    assert f"note: {NO_STEP}" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1] == "no findings in 1 checked; no optimizer step was seen"
