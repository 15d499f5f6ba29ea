"""The renderer registry, the typed report info and the kinds of report errors."""

import io
import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from ampdoctor.cli import main
from ampdoctor.lint.python.runner import lint_file, lint_python_files, lint_source
from ampdoctor.report import DOCUMENT, FINDINGS, MEASUREMENTS, ErrorKind, Renderer, Report, ReportError, ReportInfo
from ampdoctor.report.info import RankCoverage
from ampdoctor.report.json_format import report_from_dict, report_to_dict
from ampdoctor.report.registry import formats, register, unregister, write_report

ROOT = Path(__file__).resolve().parents[1]
BAD = ROOT / "examples" / "code" / "incident2_rope_cache.py"


def _write_ids(report, stream, full):
    stream.write("ids: " + ",".join(f.rule_id for f in report.findings) + f" command={report.info.command}\n")


@pytest.fixture
def ids_format():
    register(Renderer("ids", _write_ids, ".ids", "ids", kinds=frozenset({FINDINGS})))
    yield "ids"
    unregister("ids")


def test_the_built_in_formats_and_what_each_renders():
    assert formats() == ("text", "json", "sarif", "html")
    assert formats(MEASUREMENTS) == ("text", "json", "html")  # SARIF is findings at places only
    assert formats(DOCUMENT) == ("text", "json")  # rules, env, rope: their JSON document, or their own text view


def test_a_renderer_registered_in_a_test_is_a_format_of_write_report_and_the_cli(ids_format, capsys):
    report = Report.of(lint_source(BAD.read_text(), str(BAD))[0])
    out = io.StringIO()
    write_report(report, "ids", out)
    assert out.getvalue() == "ids: AMP002,AMP002 command=None\n"
    assert main(["lint", "--no-config", "--format", "ids", str(BAD)]) == 0  # AMP002 warns: below --fail-on error
    assert capsys.readouterr().out == f"ids: {','.join(f.rule_id for f in report.findings)} command=lint\n"
    # explain renders its candidates as findings in a format with no candidates form of its own
    assert main(["explain", "--format", "ids", "Attempting to unscale FP16 gradients."]) == 0
    assert capsys.readouterr().out.startswith("ids: AMP")
    # a format with no statistics form cannot be asked for --statistics; one without measurements is no compare format
    assert main(["lint", "--no-config", "--statistics", "--format", "ids", str(BAD)]) == 2
    assert "--statistics has no ids form: use --format text or json" in capsys.readouterr().err
    assert "ids" not in formats(MEASUREMENTS)
    with pytest.raises(SystemExit) as exited:
        main(["rules", "--format", "ids"])
    assert exited.value.code == 2 and "invalid choice: 'ids'" in capsys.readouterr().err


def test_an_unknown_format_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown format 'nope': expected one of text, json, sarif, html"):
        write_report(Report(), "nope", sys.stdout)


def test_sarif_statistics_stay_refused(capsys):
    assert main(["lint", "--no-config", "--statistics", "--format", "sarif", str(BAD)]) == 2
    assert "--statistics has no SARIF form: use --format text or json" in capsys.readouterr().err


def test_report_info_round_trips_through_json_in_field_order():
    info = ReportInfo(title="t", policy="bf16-mixed", policy_source="given", recorded_steps=(1, 4), notes=("n",),
                      script="train.py", script_exit_code=3, script_failed=True, exception="RuntimeError: boom",
                      ranks=RankCoverage(2, (0,), (1,)), ended_by="SIGTERM", command="run")
    doc = report_to_dict(Report(info=info))
    assert list(doc["info"]) == ["title", "policy", "policy_source", "recorded_steps", "notes", "script", "script_exit_code",
                                 "script_failed", "exception", "ranks", "ended_by", "command"]
    assert doc["info"]["ranks"] == {"world_size": 2, "reported": [0], "missing": [1]}
    assert report_from_dict(json.loads(json.dumps(doc))).info == info


def test_report_info_has_no_unknown_keys():
    with pytest.raises(TypeError):
        Report().with_info(forged=True)
    doc = report_to_dict(Report())
    doc["info"]["forged"] = True
    with pytest.raises(ValueError, match="unknown key 'forged'"):
        report_from_dict(doc)
    doc["info"] = {"script_exit_code": "1"}
    with pytest.raises(ValueError, match="script_exit_code"):
        report_from_dict(doc)


def test_merged_info_takes_what_the_other_sets():
    a = Report(info=ReportInfo(policy="fp32", notes=("a",)))
    b = Report(info=ReportInfo(command="run"))
    assert a.merge(b).info == ReportInfo(policy="fp32", notes=("a",), command="run")
    assert replace(a.info, notes=["x"]).notes == ("x",)


def test_error_kind_is_not_in_the_json_and_reads_back_as_input():
    err = ReportError("a.py", "cannot read: boom", fatal=False, kind=ErrorKind.UNREADABLE)
    assert err.to_dict() == {"file": "a.py", "message": "cannot read: boom", "fatal": False}
    assert ReportError.from_dict(err.to_dict()).kind is ErrorKind.INPUT


def test_python_lint_sorts_files_by_error_kind(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n")
    unreadable = tmp_path / "latin.py"
    unreadable.write_bytes(b"# -*- coding: nope -*-\nx = 1\n")
    assert lint_file(str(broken))[2].kind is ErrorKind.SYNTAX
    assert lint_file(str(unreadable))[2].kind is ErrorKind.UNREADABLE
    report = lint_python_files([str(broken), str(unreadable)], jobs=1)
    assert report.checked == (str(broken),)  # a file that could not be read was not checked; one that does not parse was
    assert [e.kind for e in report.errors] == [ErrorKind.SYNTAX, ErrorKind.UNREADABLE]


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="Python 3.12+ parses 3.12 syntax")
def test_newer_syntax_is_a_note_not_an_input_error(tmp_path):
    newer = tmp_path / "newer.py"
    newer.write_text("type Pair = tuple[int, int]\n")
    assert lint_file(str(newer))[2].kind is ErrorKind.NEWER_SYNTAX
    report = lint_python_files([str(newer)], jobs=1)
    assert report.errors == () and report.checked == () and len(report.info.notes) == 1
