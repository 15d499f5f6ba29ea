import io
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from ampdoctor.core import Severity, Signature, Source, catalog, finding, get_rule
from ampdoctor.core.docs import rules_markdown, write_rule

ROOT = Path(__file__).resolve().parent.parent


def test_fixed_names_and_ids():
    fixed = {
        "precision-config-mismatch": "AMP001", "rope-cache-low-precision": "AMP002", "grad-dtype-mismatch": "AMP003",
        "grad-scaler-with-bf16": "AMP004", "rope-dtype-mismatch": "AMP005",
    }
    for name, rule_id in fixed.items():
        assert get_rule(name).id == rule_id
    for name in ("implicit-dtype-promotion", "low-precision-positions", "autocast-without-dtype", "deprecated-cuda-amp", "bf16-grad-accumulation"):
        assert get_rule(name).name == name


def test_the_pattern_ids_stay_in_the_catalog():
    # Ids are stable: AMP101-AMP129 name the failure patterns of the catalog (AMP102 and AMP106 are the same patterns
    # as AMP002 and AMP004, which hold them); an id once given is never dropped or reused.
    present = {r.id for r in catalog()}
    for n in range(1, 30):
        if n in (2, 6):
            continue
        assert f"AMP1{n:02d}" in present, f"AMP1{n:02d} is missing"


def test_rules_are_complete():
    for r in catalog():
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", r.name)
        assert r.summary and r.why and r.fix and r.sources
        assert isinstance(r.severity, Severity)


def test_lookup_by_id_is_case_insensitive():
    assert get_rule("amp004") is get_rule("AMP004") is get_rule("grad-scaler-with-bf16")
    with pytest.raises(KeyError, match="unknown rule 'no-such-rule'"):
        get_rule("no-such-rule")


def test_source_parsing_and_urls():
    s = Source.parse("EleutherAI/gpt-neox PR#1311 (derive precision)")
    assert (s.repo, s.number, s.pull_request, s.note) == ("EleutherAI/gpt-neox", 1311, True, "derive precision")
    assert s.url == "https://github.com/EleutherAI/gpt-neox/pull/1311"
    assert Source.parse("h2oai/h2o-llmstudio#628").url == "https://github.com/h2oai/h2o-llmstudio/issues/628"
    with pytest.raises(ValueError, match="malformed source"):
        Source.parse("gpt-neox 1311")


def test_finding_takes_defaults_from_catalog():
    f = finding("grad-scaler-with-bf16", "scaler on bf16")
    assert (f.rule_id, f.severity, f.fix) == ("AMP004", Severity.ERROR, get_rule("AMP004").fix)
    assert finding("AMP004", "x", severity=Severity.INFO).severity is Severity.INFO


def test_docs_rules_md_is_generated_from_the_catalog():
    on_disk = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    assert on_disk == rules_markdown(), "docs/rules.md is stale: run `make docs`"


def test_a_severity_note_is_documented_but_kept_out_of_the_root_cause_explain_prints():
    rule = get_rule("AMP124")
    assert rule.severity_note.startswith("A note: torch's softmax kernels reduce half inputs in fp32")
    assert "### Severity\n\n" + rule.severity_note in rules_markdown()
    assert "bit for bit" not in rule.why  # explain shows `why` as the root cause and matches texts by its words


def test_docs_have_a_section_per_rule():
    text = rules_markdown()
    for r in catalog():
        assert f"## {r.id} {r.name}" in text


def test_cli_rules_table_and_single_rule():
    out = subprocess.run([sys.executable, "-m", "ampdoctor", "rules"], capture_output=True, text=True, check=True).stdout
    assert "AMP001" in out and "precision-config-mismatch" in out and "AMP206" in out
    one = subprocess.run([sys.executable, "-m", "ampdoctor", "rules", "AMP005"], capture_output=True, text=True, check=True).stdout
    assert "rope-dtype-mismatch" in one and "Why is this bad?" in one and "QwenLM/Qwen2.5-Omni#205" in one
    # one hop from the id to the detectors' source
    assert "rules/amp005_rope_dtype_mismatch.py:" in one


def test_a_signature_is_printed_as_written_not_read_as_markup():
    rule = replace(get_rule("AMP005"), signatures=(Signature(r"flash_attn[/\\]layers[/\\]rotary\.py|[bold]x"),))
    out = io.StringIO()
    write_rule(rule, out)
    assert r"/flash_attn[/\\]layers[/\\]rotary\.py|[bold]x/" in out.getvalue()


def test_cli_rules_json():
    import json

    out = subprocess.run([sys.executable, "-m", "ampdoctor", "rules", "--format", "json"], capture_output=True, text=True, check=True).stdout
    data = json.loads(out)
    assert (data["tool"], data["version"]) == ("ampdoctor", 1)
    rules = data["rules"]
    assert len(rules) == len(catalog())
    assert {"id", "name", "severity", "summary", "why", "fix", "sources", "detectors", "detector_sources"} <= set(rules[0])
    assert rules[0]["sources"][0]["url"].startswith("https://github.com/")
    assert {d["kind"] for d in rules[0]["detector_sources"]} == set(rules[0]["detectors"]) - {"explain"}
    one = json.loads(subprocess.run([sys.executable, "-m", "ampdoctor", "rules", "AMP004", "--format", "json"],
                                    capture_output=True, text=True, check=True).stdout)
    assert one["rule"]["name"] == "grad-scaler-with-bf16"


def test_cli_unknown_rule_exits_2():
    proc = subprocess.run([sys.executable, "-m", "ampdoctor", "rules", "nope"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "unknown rule 'nope'" in proc.stderr and "Traceback" not in proc.stderr


def test_a_detector_is_named_by_its_repository_path_in_a_clone_named_ampdoctor(tmp_path):
    """`git clone .../ampdoctor` makes a folder named like the package: the detector's file is still the
    repository's `src/ampdoctor/...` path, not one that starts at the clone's folder (docs/rules.md must not depend
    on where the clone is)."""
    import shutil

    src = Path(__file__).resolve().parents[1] / "src"
    clone_src = tmp_path / "ampdoctor" / "src"
    shutil.copytree(src / "ampdoctor", clone_src / "ampdoctor", ignore=shutil.ignore_patterns("__pycache__"))
    code = "from ampdoctor.core.registry import detectors; print(detectors(rule_id='AMP002')[0].file)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(clone_src), "PATH": "/usr/bin:/bin"}).stdout.strip()
    assert out.startswith("src/ampdoctor/rules/amp002_"), out
