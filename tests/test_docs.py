"""Docs that cannot lie: every fenced block marked ``<!-- run -->`` in README.md and docs/*.md is executed.

- ```` ```console ```` blocks: each line ``$ command`` runs from the root of a scratch copy of the repository's
  `examples/`; its exit code must be the one written after it as ``# exit N`` (0 when none is written).
  ``ampdoctor ...`` runs in this process (`ampdoctor.cli.main`, what the console script calls: no second torch
  import per command), anything else as a subprocess.
- ```` ```python ```` blocks run as a script in the same place (in this process) and must not raise.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^<!-- run -->\n```(?P<lang>console|python)\n(?P<body>.*?)^```$", re.M | re.S)
EXIT = re.compile(r"\s+#\s*exit\s+(?P<code>\d+)\s*$")


def blocks() -> list:
    out = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for m in BLOCK.finditer(text):
            line = text.count("\n", 0, m.start()) + 2
            out.append(pytest.param(m["lang"], m["body"], id=f"{page.relative_to(ROOT)}:{line}"))
    return out


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("docs")
    shutil.copytree(ROOT / "examples", work / "examples")
    return work


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("FORCE_COLOR", None)
    env["NO_COLOR"] = "1"
    return env


def run_command(argv: list[str], cwd: Path, monkeypatch, capsys) -> tuple[int, str]:
    if argv[0] != "ampdoctor":
        done = subprocess.run([sys.executable if argv[0] == "python" else argv[0], *argv[1:]], cwd=cwd, env=_env(),
                              capture_output=True, text=True, timeout=240)
        return done.returncode, done.stdout + done.stderr
    from ampdoctor.cli import main

    monkeypatch.chdir(cwd)
    try:
        code = main(argv[1:])
    except SystemExit as exc:  # argparse and scripts that exit
        code = exc.code if isinstance(exc.code, int) else 1
    out = capsys.readouterr()
    return code, out.out + out.err


def commands(body: str) -> list[tuple[list[str], int]]:
    out = []
    for line in body.splitlines():
        if not line.startswith("$ "):
            continue
        command, expected = line[2:], 0
        m = EXIT.search(command)
        if m:
            command, expected = command[: m.start()], int(m["code"])
        out.append((shlex.split(command), expected))
    return out


def test_the_docs_have_runnable_blocks():
    ids = [p.id for p in blocks()]
    assert any(i.startswith("README.md") for i in ids) and any(i.startswith("docs/getting-started.md") for i in ids)


@pytest.mark.parametrize(("lang", "body"), blocks())
def test_block_runs_as_documented(lang, body, workdir, monkeypatch, capsys):
    if lang == "python":
        monkeypatch.chdir(workdir)
        exec(compile(body, "<doc block>", "exec"), {"__name__": "__main__"})  # in this process: torch is imported once
        return
    steps = commands(body)
    assert steps, "a console block marked run has no `$ ` command"
    for argv, expected in steps:
        code, output = run_command(argv, workdir, monkeypatch, capsys)
        assert code == expected, f"{shlex.join(argv)}: exit {code}, documented {expected}\n{output[-3000:]}"


WORKFLOW = re.compile(r"^<!-- workflow -->\n```yaml\n(?P<body>.*?)^```$", re.M | re.S)


def test_documented_github_workflow_uploads_sarif_that_code_scanning_accepts(tmp_path, monkeypatch, capsys):
    import json

    import yaml

    [body] = WORKFLOW.findall((ROOT / "docs" / "integrations.md").read_text(encoding="utf-8"))
    workflow = yaml.safe_load(body)
    assert workflow["permissions"]["security-events"] == "write"  # upload-sarif needs it
    steps = workflow["jobs"]["lint"]["steps"]
    [lint] = [s["run"] for s in steps if "ampdoctor lint" in s.get("run", "")]
    [upload] = [s for s in steps if s.get("uses", "").startswith("github/codeql-action/upload-sarif")]
    assert upload["if"] == "always()"
    # Run the workflow's own command over a repository-like tree of the shipped examples.
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    code, output = run_command(shlex.split(lint), tmp_path, monkeypatch, capsys)
    assert code == 1, output  # the examples hold errors: the job fails, and `if: always()` still uploads
    sarif = json.loads((tmp_path / upload["with"]["sarif_file"]).read_text())
    assert sarif["version"] == "2.1.0" and len(sarif["runs"]) == 1
    run = sarif["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    rule_ids = [r["id"] for r in rules]
    anchors = set(re.findall(r"\]\(#([a-z0-9-]+)\)", (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")))
    for rule in rules:
        assert rule["shortDescription"]["text"] and rule["helpUri"].startswith("https://")
        assert rule["helpUri"].rpartition("#")[2] in anchors  # the link lands on the rule's section of docs/rules.md
    assert run["results"] and len(run["results"]) <= 25_000
    for result in run["results"]:
        assert result["ruleId"] in rule_ids and rule_ids[result["ruleIndex"]] == result["ruleId"]
        assert result["message"]["text"] and result["level"] in ("error", "warning", "note")
        assert result["partialFingerprints"]
        physical = result["locations"][0]["physicalLocation"]
        uri = physical["artifactLocation"]["uri"]
        assert not uri.startswith(("/", "file:")) and ":" not in uri and (tmp_path / uri).is_file(), uri
        assert physical["region"]["startLine"] >= 1


def test_ampdoctor_audit_is_callable_after_its_package_was_imported():
    import ampdoctor
    import ampdoctor.audit.session  # noqa: F401  - binds the package to `ampdoctor.audit`

    with ampdoctor.audit(policy="fp32") as a:
        pass
    assert a.report.findings == ()
