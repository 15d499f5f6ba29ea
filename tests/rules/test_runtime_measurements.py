"""Where a runtime detector and the policy predicate of the same rule both see a run, the audit reports what it
measured (the runtime detector's finding, with its numbers), not only what the observed policy implies. The fixture
walker checks lines, which both give alike; these tests check what only the measurement knows."""

from __future__ import annotations

from pathlib import Path

from ampdoctor.audit.runner import run

HERE = Path(__file__).parent


def audit_fixture(monkeypatch, relpath: str):
    case = HERE / relpath
    monkeypatch.chdir(case.parent)
    result = run(case.name, max_steps=None)
    assert result.exception is None, result.exception
    return result.report


def test_amp117_reports_the_backward_passes_it_counted(monkeypatch):
    report = audit_fixture(monkeypatch, "AMP117-bf16-grad-accumulation/runtime/bad_bf16_grads_before_fp32_master_step.py")
    [found] = [f for f in report.findings if f.rule_id == "AMP117"]
    assert found.message == "4 backward passes were accumulated into bf16 .grad before BF16_Optimizer.step()"
    assert (found.location.line, found.severity.value, dict(found.details)) == (27, "warning", {"micro_batches": 4})
