"""Every rule's fixtures, as ruff's: one folder per rule, `tests/rules/<ID>-<name>/<detector>/`, with positive (bad)
and negative (good) cases for each detector the rule has; the expected findings are written next to the cases.

- ``policy/bad/<case>/`` and ``policy/good/<case>/``: config files linted together. A bad case has an
  ``expected.yaml``: a list of ``{file, line}`` where the rule must be reported (other rules may be too). A good
  case may not report the rule at all. A case that holds Python files is linted as a project folder (its Python
  decides how its configs are read: the keys the project's own argument classes declare); only the findings at its
  config files count.
- ``code/bad*.py`` and ``code/good*.py``: Python files; a line ending in ``# ampdoctor: expect[AMP004]`` must be
  reported, and no other line may be; ``expect[AMP004:warning]`` also pins the finding's severity (where a rule's
  severity depends on the situation, as the catalog entry says).
- ``python-config/bad*.py`` and ``python-config/good*.py``: the policy detector over a config written in Python
  (``TrainingArguments(...)``, a DeepSpeed dict passed to ``deepspeed.initialize``), linted and marked as code
  fixtures are; a rule with a policy detector may have this folder, and then needs both cases.
- ``runtime/bad*.py`` and ``runtime/good*.py``: scripts run under the audit like `ampdoctor run` does; lines are
  marked as in code fixtures (a pinned severity is checked too), and ``# ampdoctor: expect-anywhere[AMP004]`` asks
  for a finding without a file line (a module or a parameter). ``# ampdoctor: policy=<policy>`` in a script gives the audit a policy.
- ``ranks/bad*.json`` and ``ranks/good*.json``: what the ranks of a distributed audit reported
  (``{"ranks": {"0": <RankFacts as JSON>, ...}}``), as rank 0 merges it; a bad case lists under ``"expected"`` the
  deviating ranks (``details.ranks``) of each finding the rule must report, a good case reports none.
- ``numerics/bad*.py`` and ``numerics/good*.py``: a ``factory()`` returning ``(model, inputs)``, compared against a
  float64 reference (`ampdoctor.compare`) under ``# ampdoctor: policy=<policy>``; a bad case says
  ``# ampdoctor: expect-anywhere[AMP207]``.
- ``explain/bad*.txt``: error text whose best candidate is the rule, by its signature; ``explain/good*.txt``: text
  its signatures must not match (it may still be offered as a guess closest by wording, which is no match).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from ampdoctor.explain import explain
from ampdoctor.lint.configs import lint_config_files
from ampdoctor.lint.engine import lint_paths
from ampdoctor.lint.settings import LintSettings
from ampdoctor.lint.engine import is_config_candidate
from ampdoctor.lint.python import lint_source
from ampdoctor.core import catalog

HERE = Path(__file__).parent
# Fixture folders of a detector kind fed another input: the policy detector over configs written in Python.
INPUT_FORMS = {"python-config": "policy"}
RULES = {r.id: r for r in catalog()}
FOLDERS = {p.name.split("-", 1)[0]: p for p in HERE.iterdir() if p.is_dir() and re.match(r"AMP\d{3}-", p.name)}
EXPECT = re.compile(r"#\s*ampdoctor:\s*expect\[(?P<ids>[^\]]+)\]")
EXPECT_ANYWHERE = re.compile(r"#\s*ampdoctor:\s*expect-anywhere\[(?P<ids>[^\]]+)\]")
POLICY = re.compile(r"#\s*ampdoctor:\s*policy=(?P<policy>\S+)")


def cases(kind: str) -> list:
    out = []
    for rule_id, folder in sorted(FOLDERS.items()):
        base = folder / kind
        if not base.is_dir():
            continue
        if kind == "policy":
            found = [p for side in ("bad", "good") for p in sorted((base / side).glob("*")) if p.is_dir()]
        else:
            suffix = {"explain": ".txt", "ranks": ".json"}.get(kind, ".py")
            found = sorted(p for p in base.iterdir() if p.name.startswith(("bad", "good"))
                           and (p.suffix == suffix or (kind == "code" and p.is_dir())))
        out += [pytest.param(rule_id, p, id=f"{rule_id}-{p.relative_to(folder)}") for p in found]
    return out


def marks(path: Path, rule_id: str) -> dict[int, str | None]:
    """{line: pinned severity or None} of the lines marked ``expect[RULE]`` or ``expect[RULE:severity]``."""
    out: dict[int, str | None] = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        for mark in (x.strip() for x in m["ids"].split(",")) if (m := EXPECT.search(line)) else ():
            rule, _, severity = mark.partition(":")
            if rule == rule_id:
                out[n] = severity or None
    return out


def marked_lines(path: Path, rule_id: str) -> list[int]:
    return sorted(marks(path, rule_id))


def is_bad(path: Path) -> bool:
    return path.name.startswith("bad") or path.parent.name == "bad"


def test_every_rule_has_a_fixture_folder_with_both_cases_for_each_detector():
    missing = []
    for rule in catalog():
        folder = FOLDERS.get(rule.id)
        if folder is None or folder.name != f"{rule.id}-{rule.name}":
            missing.append(f"{rule.id}-{rule.name}/")
            continue
        forms = [form for form, kind in INPUT_FORMS.items() if kind in rule.detectors and (folder / form).is_dir()]
        for kind in (*rule.detectors, *forms):
            base = folder / kind
            if kind == "policy":
                sides = {side for side in ("bad", "good") if base.is_dir() and any(p.is_dir() for p in (base / side).glob("*"))}
            else:
                sides = {side for side in ("bad", "good") if base.is_dir() and any(base.glob(f"{side}*"))}
            missing += [f"{folder.name}/{kind}/{side}" for side in ("bad", "good") if side not in sides]
    assert missing == []


def test_no_fixture_for_a_detector_the_rule_does_not_have():
    stray = [f"{folder.name}/{kind.name}" for rule_id, folder in FOLDERS.items() for kind in folder.iterdir()
             if kind.is_dir() and INPUT_FORMS.get(kind.name, kind.name) not in RULES[rule_id].detectors]
    assert stray == []


@pytest.mark.parametrize("rule_id, case", cases("policy"))
def test_policy_fixture(rule_id, case):
    files = sorted(p for p in case.rglob("*") if p.is_file() and p.name != "expected.yaml" and is_config_candidate(p))
    if any(case.rglob("*.py")):
        report = lint_paths([case], LintSettings(select=frozenset({"ALL"}), jobs=1))
    else:
        report = lint_config_files(files)
    assert not [e for e in report.errors if e.fatal], report.errors
    mine = [f for f in report.findings if f.rule_id == rule_id and Path(f.location.file) in files]
    got = sorted((Path(f.location.file).relative_to(case).as_posix(), f.location.line) for f in mine)
    if is_bad(case):
        expected = yaml.safe_load((case / "expected.yaml").read_text())
        assert got == sorted((e["file"], e["line"]) for e in expected)
        # an expectation may also pin the severity (error only where the input will crash)
        severities = {(Path(f.location.file).relative_to(case).as_posix(), f.location.line): f.severity.value for f in mine}
        assert {(e["file"], e["line"]): e["severity"] for e in expected if "severity" in e}.items() <= severities.items()
    else:
        assert got == []


@pytest.mark.parametrize("rule_id, case", cases("code") + cases("python-config"))
def test_code_fixture(rule_id, case):
    if case.is_dir():
        return check_project_case(rule_id, case)
    # The case's own name says what kind of code it is (the fixture tree itself is under tests/).
    findings, error = lint_source(case.read_text(), str(case), kind_path=case.name)
    assert error is None, error
    # A finding made a note because of the kind of code it sits in (tests/python_lint/test_code_kinds.py) is not one
    # the case asks for.
    findings = [f for f in findings if "code_kind" not in f.details]
    got = sorted(f.location.line for f in findings if f.rule_id == rule_id)
    expected = marked_lines(case, rule_id)
    assert bool(expected) == is_bad(case), "bad fixtures mark a line, good fixtures none"
    assert got == expected
    pinned = {line: severity for line, severity in marks(case, rule_id).items() if severity}
    assert {f.location.line: f.severity.value for f in findings if f.rule_id == rule_id and f.location.line in pinned} == pinned


def check_project_case(rule_id: str, case: Path) -> None:
    """``code/bad_<case>/`` and ``code/good_<case>/``: a small project linted as a folder, so that what one file sets
    up (autocast in the trainer, a bf16 config) judges another; marks as in single-file cases, in any of its files."""
    report = lint_paths([case], LintSettings(select=frozenset({"ALL"}), jobs=1))
    assert not report.errors, report.errors
    files = sorted(p for p in case.rglob("*.py"))
    # A note is not a finding the case asks for (the project's own code may be why it is one), except where a line
    # pins it (``expect[RULE:info]``, in a good case too): there the note must be given, at that line. A pinned
    # severity is checked as in single-file cases.
    marked = [(p.relative_to(case).as_posix(), line, severity) for p in files for line, severity in marks(p, rule_id).items()]
    expected = sorted((file, line) for file, line, severity in marked if severity != "info")
    mine = [(Path(f.location.file).relative_to(case).as_posix(), f.location.line, f.severity.value) for f in report.findings
            if f.rule_id == rule_id]
    got = sorted((file, line) for file, line, severity in mine if severity != "info")
    assert bool(expected) == is_bad(case), "bad fixtures mark a line, good fixtures none"
    assert got == expected
    pinned = {(file, line): severity for file, line, severity in marked if severity}
    assert {(file, line): severity for file, line, severity in mine if (file, line) in pinned} == pinned


@pytest.mark.parametrize("rule_id, case", cases("runtime"))
def test_runtime_fixture(rule_id, case, monkeypatch):
    from ampdoctor.audit.runner import run

    text = case.read_text()
    policy = POLICY.search(text)
    monkeypatch.chdir(case.parent)
    result = run(case.name, policy=policy["policy"] if policy else None, max_steps=None)
    mine = [f for f in result.report.findings if f.rule_id == rule_id]
    got = sorted(f.location.line for f in mine if f.location.file == case.name and f.location.line)
    anywhere = [m for m in EXPECT_ANYWHERE.finditer(text) if rule_id in m["ids"]]
    expected = marked_lines(case, rule_id)
    assert bool(expected or anywhere) == is_bad(case), "bad fixtures mark a line or expect-anywhere, good fixtures none"
    assert got == expected
    pinned = {line: severity for line, severity in marks(case, rule_id).items() if severity}
    assert {f.location.line: f.severity.value for f in mine if f.location.file == case.name and f.location.line in pinned} == pinned
    if anywhere:
        assert mine, f"{rule_id} expected somewhere in the report"
    if not is_bad(case):
        assert mine == []


@pytest.mark.parametrize("rule_id, case", cases("ranks"))
def test_ranks_fixture(rule_id, case):
    from ampdoctor.audit.distributed import cross_rank_findings
    from ampdoctor.audit.rankfacts import RankFacts

    data = json.loads(case.read_text())
    facts = {int(rank): RankFacts.from_dict(f) for rank, f in data["ranks"].items()}
    got = sorted(f.details["ranks"] for f in cross_rank_findings(facts) if f.rule_id == rule_id)
    assert bool(data.get("expected")) == is_bad(case), "bad fixtures list expected findings, good fixtures none"
    assert got == sorted(data.get("expected", []))
@pytest.mark.parametrize("rule_id, case", cases("numerics"))
def test_numerics_fixture(rule_id, case):
    import importlib.util

    from ampdoctor.numerics import compare

    text = case.read_text()
    spec = importlib.util.spec_from_file_location(f"fixture_{rule_id}_{case.stem}", case)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model, inputs = module.factory()
    policy = POLICY.search(text)
    result = compare(model, inputs, policy=policy["policy"] if policy else "bf16-mixed", compiled="# ampdoctor: compiled" in text)
    mine = [f for f in result.report.findings if f.rule_id == rule_id]
    expected = any(rule_id in m["ids"] for m in EXPECT_ANYWHERE.finditer(text))
    assert expected == is_bad(case), "bad fixtures say expect-anywhere, good fixtures nothing"
    assert bool(mine) == expected, [f.message for f in result.report.findings]


@pytest.mark.parametrize("rule_id, case", cases("explain"))
def test_explain_fixture(rule_id, case):
    candidates = explain(case.read_text())
    if is_bad(case):
        # matched by the rule's own signature, not merely the closest by wording
        assert candidates and candidates[0].rule.id == rule_id and candidates[0].basis == "signature", \
            [(c.rule.id, c.basis) for c in candidates]
    else:
        assert rule_id not in [c.rule.id for c in candidates if c.basis == "signature"]
