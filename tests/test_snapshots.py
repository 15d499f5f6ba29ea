"""Snapshots of rendered reports, as ruff keeps them: what a user sees, checked byte for byte, so a change to a
message, a location or the layout is a reviewed change. Regenerate with AMPDOCTOR_UPDATE_SNAPSHOTS=1 after
reading the diff."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ampdoctor.explain import explain
from ampdoctor.lint import LintSettings, lint_paths
from ampdoctor.report import render_json, render_text
from ampdoctor.report.envelopes import candidates_document

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOTS = Path(__file__).parent / "snapshots"
UPDATE = os.environ.get("AMPDOCTOR_UPDATE_SNAPSHOTS") == "1"


def check(name: str, text: str) -> None:
    path = SNAPSHOTS / name
    if UPDATE or not path.exists():
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
        if not UPDATE:
            pytest.fail(f"snapshot {name} was missing and has been written: review it and rerun")
    assert text == path.read_text(), f"{name} changed: review the diff, then rerun with AMPDOCTOR_UPDATE_SNAPSHOTS=1"


def without_version(text: str) -> str:
    data = json.loads(text)
    data.pop("tool_version", None)
    return json.dumps(data, indent=2) + "\n"


@pytest.fixture(autouse=True)
def in_repository_root(monkeypatch):
    monkeypatch.chdir(ROOT)  # reports name files as the user typed them


def test_lint_text_of_incident_1_configs():
    report = lint_paths(["examples/configs/incident1_neox"], LintSettings(jobs=1))
    check("lint_incident1_neox.txt", render_text(report, width=120))


def test_lint_text_of_incident_3_configs():
    report = lint_paths(["examples/configs/incident3_simpletuner"], LintSettings(jobs=1))
    check("lint_incident3_simpletuner.txt", render_text(report, width=120))


def test_lint_json_of_incident_4_code_and_config():
    report = lint_paths(["examples/code/incident4_gradscaler.py", "examples/configs/incident4_h2o"], LintSettings(jobs=1))
    check("lint_incident4.json", without_version(render_json(report)))


def test_explain_json_of_the_incident_4_log():
    text = (ROOT / "examples/errors/incident4_h2o_gradscaler.log").read_text()
    check("explain_incident4.json", without_version(json.dumps(candidates_document(explain(text)))))


def test_audit_json_of_the_incident_4_script():
    from dataclasses import replace

    from ampdoctor.audit.runner import run

    result = run("examples/incidents/incident4_gradscaler_bf16.py", max_steps=None)
    # The per-module table counts ops, which depend on the torch build; the findings are what a user acts on.
    check("audit_incident4.json", without_version(render_json(replace(result.report, tables=()))))
