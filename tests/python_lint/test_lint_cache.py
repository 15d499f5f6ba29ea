"""The lint cache: an unchanged tree is not parsed again, and an entry is stale as soon as what it depended on
changed: the file's bytes, or the project facts it was judged under (a trainer that now runs it under autocast)."""

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from ampdoctor.lint import cache as lint_cache
from ampdoctor.lint.engine import lint_paths
from ampdoctor.lint.python import pool, runner
from ampdoctor.lint.python.project import Evidence, Summary
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



def test_a_file_stored_but_for_the_project_rules_gets_them_under_its_own_context_once_no_longer_reached(tmp_path):
    # A file the trainer reaches is stored without the findings of the rules that read the project context (its
    # judgement under the trainer's context holds them). When the trainer no longer reaches it, those rules judge
    # it under its own context, as a lint without the cache does: here its bf16 cos table (AMP002) stands alone.
    root, cache = project(tmp_path / "p", "torch.bfloat16"), tmp_path / "cache"
    rope = root / "pkg" / "rope.py"
    rope.write_text(textwrap.dedent(ROPE).replace(
        '/ dim))\n', '/ dim))\n        freqs = torch.outer(torch.arange(2048).float(), self.inv_freq)\n'
        '        self.register_buffer("cos_cached", freqs.cos().bfloat16(), persistent=False)\n'))
    assert {("AMP101", "rope.py"), ("AMP002", "rope.py")} <= {f[:2] for f in lint(root, cache)}
    (root / "train.py").write_text(textwrap.dedent(TRAIN).replace('with torch.autocast("cuda", dtype=DTYPE):', "if True:"))
    uncached = sorted((f.rule_id, Path(f.location.file).name, f.location.line)
                      for f in lint_paths([root], LintSettings(jobs=1, cache=None)).findings)
    assert [f for f in uncached if f[1] == "rope.py"] == [("AMP002", "rope.py", 10)]
    assert lint(root, cache) == uncached


# The index: a file that keeps the stat signature recorded for it is neither read nor hashed again; one that may
# have changed (another signature, or a change too recent for its signature to show the next one) is read.

def settled(monkeypatch) -> None:
    """Every file counts as changed long before it was read, as in a checkout made yesterday."""
    monkeypatch.setattr(lint_cache, "RACY_NS", -10**15)


def rewrite_in_place(path: Path, text: str) -> None:
    """New content of the same size with the old modification time, in the same inode: only ctime tells."""
    before = path.stat()
    assert len(text.encode()) == before.st_size
    deadline = time.monotonic() + 5
    while True:
        with open(path, "r+b") as f:
            f.write(text.encode())
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        if path.stat().st_ctime_ns != before.st_ctime_ns or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (before.st_size, before.st_mtime_ns, before.st_ino)


def without_findings(path: Path) -> str:
    """Text of the same size as the file's, which has no finding."""
    return "#" * (path.stat().st_size - 1) + "\n"


def test_an_unchanged_file_is_neither_read_nor_hashed_again(tmp_path, monkeypatch):
    settled(monkeypatch)
    root, cache = project(tmp_path / "p", "torch.bfloat16"), tmp_path / "cache"
    first = lint(root, cache)
    read = []
    real = lint_cache.read
    monkeypatch.setattr(lint_cache, "read", lambda p: read.append(p) or real(p))
    assert lint(root, cache) == first
    assert read == []
    (root / "train.py").write_text((root / "train.py").read_text() + "\n")
    assert lint(root, cache) == first
    assert [Path(p).name for p in read] == ["train.py"]


def test_a_file_rewritten_with_the_same_size_and_mtime_is_linted_again(tmp_path, monkeypatch):
    settled(monkeypatch)
    root, cache = project(tmp_path / "p", "torch.bfloat16"), tmp_path / "cache"
    assert ("AMP101", "rope.py", 11) in lint(root, cache)
    rope = root / "pkg" / "rope.py"
    rewrite_in_place(rope, without_findings(rope))
    assert [f for f in lint(root, cache) if f[1] == "rope.py"] == []


def test_a_file_changed_too_recently_to_be_told_by_its_signature_is_hashed_again(tmp_path, monkeypatch):
    # a file system whose time stamps cannot tell the rewrite (as within one tick of its clock): the signature of
    # the rewritten file is the one read before; the entry was racy, so it was never trusted
    monkeypatch.setattr(lint_cache, "signature", lambda st: (st.st_size, st.st_mtime_ns, 0, 0, 0))
    root, cache = project(tmp_path / "p", "torch.bfloat16"), tmp_path / "cache"
    assert ("AMP101", "rope.py", 11) in lint(root, cache)
    rope = root / "pkg" / "rope.py"
    assert lint_cache.Index(cache, [str(root)]).get(str(rope)) is None
    rewrite_in_place(rope, without_findings(rope))
    assert [f for f in lint(root, cache) if f[1] == "rope.py"] == []


def test_a_file_is_recorded_once_its_last_change_is_older_than_the_racy_window(tmp_path, monkeypatch):
    path = tmp_path / "a.py"
    path.write_text("x = 1\n")
    changed = max(path.stat().st_ctime_ns, path.stat().st_mtime_ns)
    monkeypatch.setattr(lint_cache.time, "time_ns", lambda: changed + lint_cache.RACY_NS)
    assert lint_cache.read(str(path))[2] is None
    monkeypatch.setattr(lint_cache.time, "time_ns", lambda: changed + lint_cache.RACY_NS + 1)
    raw, digest, seen = lint_cache.read(str(path))
    assert seen == (lint_cache.signature(path.stat()), digest) and lint_cache.unchanged(str(path), seen) == digest
    path.write_text("x = 2\n")
    assert lint_cache.unchanged(str(path), seen) is None


def test_a_damaged_index_is_an_empty_one(tmp_path, monkeypatch):
    settled(monkeypatch)
    root, cache = project(tmp_path / "p", "torch.bfloat16"), tmp_path / "cache"
    first = lint(root, cache)
    index = lint_cache.Index(cache, [str(root)])
    assert index.get(str(root / "train.py")) is not None
    for damaged in ("{", '{"version": 2, "files": {"x": [1]}}', "[]", '{"version": 2, "files": []}'):
        index.file.write_text(damaged)
        assert lint(root, cache) == first


def test_a_relint_of_an_unchanged_tree_starts_no_worker_process(tmp_path, monkeypatch):
    # the stored results of files the index shows unchanged are taken in this process: a pool would cost more
    settled(monkeypatch)
    root, cache = project(tmp_path / "p", "torch.bfloat16"), tmp_path / "cache"
    for i in range(pool.PARALLEL_MIN_FILES):
        (root / "pkg" / f"m{i}.py").write_text(f"import torch\n\nx{i} = torch.ones(3).half()\n")
    first = sorted((f.rule_id, f.location.file, f.location.line)
                   for f in lint_paths([root], LintSettings(jobs=2, cache=cache)).findings)

    def no_pool(*args, **kwargs):
        raise AssertionError("a worker pool was started")

    monkeypatch.setattr(pool, "ProcessPoolExecutor", no_pool)
    again = sorted((f.rule_id, f.location.file, f.location.line)
                   for f in lint_paths([root], LintSettings(jobs=2, cache=cache)).findings)
    assert again == first and ("AMP101", str(root / "pkg" / "rope.py"), 11) in first


# `ampdoctor lint` run twice in a fresh interpreter; the second prints the ampdoctor modules it imported.
TWICE = """
import sys
from ampdoctor.cli import main
main(["lint", "--no-config", "--exit-zero", "-j", "1", sys.argv[1]])
"""
IMPORTED = TWICE + """
print(sorted(m for m in sys.modules if m.startswith("ampdoctor")))
"""


def test_a_relint_whose_results_are_all_stored_imports_no_framework_reader_and_export_still_parses(tmp_path):
    root = project(tmp_path / "p", "torch.bfloat16")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src"), "AMPDOCTOR_CACHE_DIR": str(tmp_path / "c")}

    def python(script: str, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)

    first = python(TWICE, str(root))
    assert "AMP101" in first.stdout and first.returncode == 0, first.stderr
    again = python(IMPORTED, str(root))
    assert again.stdout.startswith(first.stdout)
    imported = again.stdout[len(first.stdout):]
    # the readers of configs (and the Python configs' reader, which uses them) are imported to lint, not to report
    assert "ampdoctor.frameworks" not in imported and "ampdoctor.lint.python.embedded" not in imported
    assert "ampdoctor.lint.cache" in imported  # the check can fail
    export = python("import sys; from ampdoctor.cli import main; sys.exit(main(sys.argv[1:]))", "export", "--help")
    assert export.returncode == 0 and "{neox,deepspeed,accelerate," in export.stdout.replace("\n", "").replace(" ", "")
    wrong = python("import sys; from ampdoctor.cli import main; sys.exit(main(sys.argv[1:]))", "export", "--policy", "bf16-mixed", "--to", "x")
    assert wrong.returncode == 2 and "invalid choice: 'x'" in wrong.stderr


PINNED = """
import torch
from torch import nn

class Modulation(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        with torch.autocast(device_type="cuda", dtype=torch.float32):
            return self.out(x)
"""


def test_a_relint_from_stored_summaries_knows_the_device_the_project_runs_on(tmp_path):
    # the model's finding is a warning because train.py runs on MPS: a re-lint served from stored summaries must
    # still know it (the devices are read from the texts, not stored), and a train.py that no longer picks MPS
    # makes it a note
    root, cache = tmp_path / "p", tmp_path / "cache"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "model.py").write_text(textwrap.dedent(PINNED))
    (root / "train.py").write_text('import torch\nfrom pkg.model import Modulation\nDEVICE = "mps"\n')

    def severities() -> list[tuple[str, str]]:
        report = lint_paths([root], LintSettings(jobs=1, cache=cache))
        return sorted((f.rule_id, f.severity.value) for f in report.findings if f.rule_id == "AMP140")

    assert severities() == [("AMP140", "warning")]
    assert severities() == [("AMP140", "warning")]
    (root / "train.py").write_text('import torch\nfrom pkg.model import Modulation\nDEVICE = "cuda"\n')
    os.utime(root / "train.py", (time.time() - 10, time.time() - 10))
    assert severities() == [("AMP140", "info")]


def test_stored_summaries_keep_the_classes_a_model_cast_reaches(tmp_path):
    # train.py casts one of two classes of lm/model.py to bf16; a third class there is never built. A re-lint after
    # only the model file changed reads train.py's summary from the cache: the cast must still reach exactly the
    # two classes it builds (a summary whose classes were lost would reach all three, or none)
    fixture = Path(__file__).parents[1] / "rules" / "AMP125-loss-low-precision" / "code" / "bad_model_cast_by_trainer_reaches_its_classes"
    root, cache = tmp_path / "p", tmp_path / "cache"
    (root / "lm").mkdir(parents=True)
    for part in ("train.py", "lm/__init__.py", "lm/model.py"):
        (root / part).write_text((fixture / part).read_text())

    def losses() -> list[int | None]:
        report = lint_paths([root], LintSettings(jobs=1, cache=cache))
        return sorted(f.location.line for f in report.findings if f.rule_id == "AMP125")

    model = root / "lm" / "model.py"
    marked = [n for n, line in enumerate(model.read_text().splitlines(), 1) if "expect[AMP125]" in line]
    assert len(marked) == 3 and losses() == marked
    model.write_text(model.read_text() + "\n\n# changed\n")
    os.utime(model, (time.time() - 10, time.time() - 10))
    assert losses() == marked


def test_a_stored_summary_is_the_summary_it_was():
    # every field of the project model's evidence survives the cache's JSON: what casts the weights, and which
    # classes of a file a model cast reaches
    evidence = Evidence("a model cast to bf16 without autocast", frozenset({"bf16"}), "train.py", 9, "imported at train.py:3",
                        casts_weights=True, classes=frozenset({"TinyLM"}))
    summary = Summary("train.py", "train", (("lm.model.TinyLM", 3),), half_model=evidence, model_classes=("TinyLM", "Classifier"))
    stored = lint_cache._summary(json.loads(json.dumps(dataclasses.asdict(summary), default=lint_cache._plain)))
    assert stored == summary
