"""How well does `ampdoctor explain` do on real texts it has not been tuned on? Replays the corpus's own history.

Every commit that added texts to bench/explain/corpus.yaml is taken in turn: the tune texts it added (the held-out
split is never read here) are explained by the source tree of the commit just before it, that is, by signatures and a
calibration that had never seen them. Counted over all batches: top-1, top-3, how many first answers were given with
confidence, and how many of those were wrong. The tune split stays tuned-on afterwards, so this is the honest
estimate of generalization that the tune rows of explain_bench.py are not; a change to the confidence rules is
judged by how it would have marked the answers listed with ``--show`` (confident wrong and confident right).

``--calibration`` keeps each old tree's catalog (its signatures, weights and context) but explains with this
checkout's src/ampdoctor/explain.py: how today's ranking and guess rules would have marked the signatures of the day,
so a change to those rules is measured on texts its own catalog never saw (a field the old Signature lacks, such as
``told``, takes its default there).

Needs the git history of this checkout; each old tree is unpacked once under a temporary directory.

    python bench/explain/replay.py [--show] [--calibration]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))  # benchdocs

import benchdocs  # noqa: E402

CORPUS = "bench/explain/corpus.yaml"
# Run inside an old tree: explain each text of a JSON list read from stdin, print the first answers as JSON.
RUNNER = """
import importlib.util, json, os, sys
overlay = os.environ.get("REPLAY_EXPLAIN_PY")
if overlay:  # this checkout's explain.py over the old tree's catalog; fields the old Signature lacks take their default
    from ampdoctor.core import model
    for field, default in (("unless", ""), ("told", False), ("doubt", "")):
        if not hasattr(model.Signature, field):
            setattr(model.Signature, field, default)
    spec = importlib.util.spec_from_file_location("ampdoctor.explain", overlay)
    module = importlib.util.module_from_spec(spec)
    sys.modules["ampdoctor.explain"] = module
    spec.loader.exec_module(module)
from ampdoctor.explain import explain
out = []
for text in json.load(sys.stdin):
    cands = explain(text, limit=3)
    out.append([[c.rule.id for c in cands], bool(cands) and cands[0].guess, cands[0].reason[:200] if cands else ""])
print(json.dumps(out))
"""


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout


def _corpus_at(commit: str) -> dict[str, dict]:
    try:
        return {e["name"]: e for e in yaml.safe_load(_git("show", f"{commit}:{CORPUS}")) or []}
    except subprocess.CalledProcessError:  # no corpus before its first commit
        return {}


def _explain_with_tree(commit: str, texts: list[str], scratch: Path, overlay: Path | None = None) -> list[list]:
    tree = scratch / commit
    if not tree.exists():
        tree.mkdir(parents=True)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit, "src"], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "REPLAY_EXPLAIN_PY": str(overlay or "")}
    done = subprocess.run([sys.executable, "-c", RUNNER], input=json.dumps(texts), capture_output=True, text=True,
                          env=env, check=True)
    return json.loads(done.stdout)


def replay(scratch: Path, overlay: Path | None = None) -> list[dict]:
    """One row per tune text of every batch: its label, the first answers of the tree before the batch, a guess or not.
    `overlay`: an explain.py to run instead of the old tree's own (the old signatures read by today's calibration)."""
    rows = []
    commits = _git("log", "--format=%h", "--reverse", "--", CORPUS).split()
    for commit in commits[1:]:
        before = _corpus_at(f"{commit}^")
        added = [e for name, e in _corpus_at(commit).items()
                 if name not in before and benchdocs.split_of(name) == "tune"]
        if not added:
            continue
        answers = _explain_with_tree(f"{commit}^", [e["text"] for e in added], scratch, overlay)
        for entry, (ids, guess, reason) in zip(added, answers):
            rule = str(entry["rule"])
            right = (not ids or guess) if rule == "none" else bool(ids) and ids[0] == rule
            rows.append({"batch": commit, "name": entry["name"], "rule": rule, "answers": ids, "guess": guess,
                         "right": right, "top3": right if rule == "none" else rule in ids[:3],
                         "confident": bool(ids) and not guess, "reason": reason})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--show", action="store_true", help="list the confident answers, wrong ones marked")
    parser.add_argument("--calibration", action="store_true",
                        help="explain with this checkout's src/ampdoctor/explain.py over each old tree's catalog: how "
                             "today's ranking and guess rules would have marked the signatures of the day")
    args = parser.parse_args(argv)
    overlay = ROOT / "src" / "ampdoctor" / "explain.py" if args.calibration else None
    with tempfile.TemporaryDirectory() as scratch:
        rows = replay(Path(scratch), overlay)
    confident = [r for r in rows if r["confident"]]
    wrong = [r for r in confident if not r["right"]]
    print(f"{len(rows)} tune texts in {len({r['batch'] for r in rows})} batches, each explained by the tree before it: "
          f"top-1 {sum(r['right'] for r in rows)}, top-3 {sum(r['top3'] for r in rows)}, confident {len(confident)}, confident wrong {len(wrong)}")
    if args.show:
        for r in confident:
            mark = "WRONG" if not r["right"] else "right"
            print(f"{mark}  {r['batch']}  {r['name']}  {r['rule']} -> {r['answers'][0]}  | {r['reason']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
