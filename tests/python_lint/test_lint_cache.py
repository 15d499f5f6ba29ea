"""The lint cache: an unchanged tree is not parsed again, and an entry is stale as soon as what it depended on
changed: the file's bytes, or the project facts it was judged under (a trainer that now runs it under autocast)."""

import json
import textwrap
from pathlib import Path

from ampdoctor.lint.engine import lint_paths
from ampdoctor.lint.python import runner
from ampdoctor.lint.settings import LintSettings

ROPE = """
import torch
from torch import nn

class RotaryEmbedding(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / 10000 ** (torch.arange(0, dim, 2).float() / dim))

    def forward(self, position_ids):
        freqs = self.inv_freq[None, :, None].float() @ position_ids[:, None, :].float()
        return freqs.cos(), freqs.sin()
"""

TRAIN = """
import torch
from pkg.rope import RotaryEmbedding

def main(loader):
    rope = RotaryEmbedding(64)
    for pos in loader:
        with torch.autocast("cuda", dtype=DTYPE):
            cos, sin = rope(pos)
        (cos + sin).mean().backward()
"""


def project(root: Path, dtype: str) -> Path:
    (root / "pkg").mkdir(parents=True, exist_ok=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "rope.py").write_text(textwrap.dedent(ROPE))
    (root / "train.py").write_text(textwrap.dedent(TRAIN).replace("DTYPE", dtype))
    return root


def lint(root: Path, cache: Path) -> list[tuple[str, str, int | None]]:
    report = lint_paths([root], LintSettings(jobs=1, cache=cache))
    return sorted((f.rule_id, Path(f.location.file).name, f.location.line) for f in report.findings)


def test_an_unchanged_tree_is_read_from_the_cache_and_gives_the_same_findings(tmp_path, monkeypatch):
    root, cache = project(tmp_path / "p", "torch.bfloat16"), tmp_path / "cache"
    first = lint(root, cache)
    assert ("AMP101", "rope.py", 11) in first
    assert (cache / ".gitignore").is_file()
    parsed = []
    monkeypatch.setattr(runner, "_lint", lambda *a, **k: parsed.append(a[1]) or ([], None, None))
    assert lint(root, cache) == first
    assert parsed == []  # nothing was linted again


def test_an_entry_depends_on_the_project_facts_it_was_judged_under(tmp_path):
    root, cache = project(tmp_path / "p", "torch.bfloat16"), tmp_path / "cache"
    assert ("AMP101", "rope.py", 11) in lint(root, cache)
    # the model file did not change, the trainer did: it no longer runs the model under autocast
    (root / "train.py").write_text(textwrap.dedent(TRAIN).replace('with torch.autocast("cuda", dtype=DTYPE):', "if True:"))
    assert [f for f in lint(root, cache) if f[1] == "rope.py"] == []


def test_a_damaged_entry_is_a_miss_not_an_error(tmp_path):
    root, cache = project(tmp_path / "p", "torch.bfloat16"), tmp_path / "cache"
    first = lint(root, cache)
    for entry in cache.rglob("*"):
        if entry.is_file() and entry.name != ".gitignore":
            entry.write_text(json.dumps({"findings": [{"id": "AMP999"}], "error": None, "summary": None}))
    assert lint(root, cache) == first


def test_a_changed_context_is_not_served_from_the_entry_of_the_old_one(tmp_path):
    root, cache = project(tmp_path / "p", "torch.bfloat16"), tmp_path / "cache"

    def messages() -> list[str]:
        report = lint_paths([root], LintSettings(jobs=1, cache=cache))
        return [f.message for f in report.findings if f.rule_id == "AMP101"]

    assert "bf16 autocast (train.py:8" in messages()[0]
    (root / "train.py").write_text(textwrap.dedent(TRAIN).replace("DTYPE", "torch.float16"))
    assert "fp16 autocast (train.py:8" in messages()[0]
