"""`ampdoctor rope`: the variants' errors against float64 agree in order of magnitude with ROPE.md part (b)."""

import json

from ampdoctor.cli import main


def test_rope_command_json_variants_and_magnitudes(tmp_path, monkeypatch, capsys):
    (tmp_path / "ropenet.py").write_text(
        "from torch import nn\nfrom ampdoctor.nn import RotaryEmbedding\n\n\ndef factory():\n"
        "    model = nn.Module()\n    model.rope = RotaryEmbedding(64, base=500000.0, max_position=16384)\n    return model, ()\n")
    monkeypatch.chdir(tmp_path)
    html = tmp_path / "rope.html"
    assert main(["rope", "--head-dim", "64", "--base", "500000", "--max-position", "16384", "--format", "json",
                 "--model", "ropenet:factory", "--html", str(html)]) == 0
    data = json.loads(capsys.readouterr().out)
    v = {x["name"]: x for x in data["variants"]}
    assert list(v) == ["ampdoctor", "fp32-table", "bf16-table", "bf16-positions", "bf16-math", "model:rope"]
    assert v["ampdoctor"]["cos_max_error"] < 1e-7 and v["model:rope"]["cos_max_error"] < 1e-7
    assert 1e-5 < v["fp32-table"]["cos_max_error"] < 1e-2  # fp32 angles: grows with position (ROPE.md: 2.3e-3 at 4k-32k)
    assert 1e-3 < v["bf16-table"]["cos_max_error"] < 2e-2  # ROPE.md: 8-10e-3
    assert v["bf16-positions"]["cos_max_error"] > 0.5  # positions collapse: sign flips (ROPE.md: 2.0)
    assert v["bf16-math"]["logit_mean_error"] > v["bf16-table"]["logit_mean_error"]  # ROPE.md: 2.7e-4 vs 1.4e-4
    ranges = [r["range"] for r in v["ampdoctor"]["relative_position_violation"]]
    assert ranges == ["[0, 4k)", "[4k, 16k)"]
    assert max(r["max"] for r in v["ampdoctor"]["relative_position_violation"]) < 1e-7
    assert min(r["max"] for r in v["bf16-positions"]["relative_position_violation"]) > 0.05
    assert "<svg" in html.read_text()


def test_rope_command_rejects_bad_scaling(capsys):
    assert main(["rope", "--scaling", "{not json"]) == 2
    assert capsys.readouterr().err.startswith("ampdoctor: error: --scaling: not JSON")
