"""Ecosystem check: lint training repositories at pinned commits and count what is true, false or debatable.

    PYTHONPATH=src .venv/bin/python bench/ecosystem/ecosystem.py [--cache DIR] [--only NAME,...] [--show] [--no-docs]
    PYTHONPATH=src .venv/bin/python bench/ecosystem/ecosystem.py --quick      # a generated tree, no network, no docs
    PYTHONPATH=src .venv/bin/python bench/ecosystem/ecosystem.py --split tune --jobs 2 --json-out A.json --no-docs
    PYTHONPATH=src .venv/bin/python bench/ecosystem/ecosystem.py --compare A.json B.json   # what a change did

The repositories are listed in bench/ecosystem/repos.yaml (name, repo, pinned commit, optional paths). Each is
extracted from its fetched mirror (`fetch github:OWNER/NAME` puts a bare git dir at /work/.mirror/OWNER+NAME/repo;
--mirrors changes that folder) into the cache folder, only the files lint reads (.py, .json, .yaml, .yml, .env, shell launchers, the root README and requirement files),
blob by blob so a blob missing from the mirror is skipped and reported, not fatal. Nothing upstream is committed.

Each repository is linted twice, with the default rule set and with every rule (--select ALL). Every warning and
error gets a key, ``NAME:FINGERPRINT`` where FINGERPRINT is ampdoctor's baseline fingerprint (rule, file relative to
the repository root, text of the line: it survives line moves) and is looked up in bench/ecosystem/verdicts.yaml:

    NAME:FINGERPRINT: {verdict: true|false|debatable, rule: AMPxxx, at: file:line, why: one line of evidence}

The split of a repository (tune or heldout) is computed from its name: see the header of repos.yaml.
Prints per split and per 100 files: warnings+errors, true, false, debatable, false errors, and the findings not
judged yet (with --show, every finding and its verdict). A full run rewrites the `ecosystem` block of
docs/benchmarks.md (unless --no-docs or --only).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from ampdoctor.core import Severity
from ampdoctor.lint import LintSettings, lint_paths
from ampdoctor.lint.baseline import fingerprint
from ampdoctor.lint.settings import rule_ids

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # benchdocs
import benchdocs  # noqa: E402

MANIFEST = HERE / "repos.yaml"
VERDICTS = HERE / "verdicts.yaml"
QUICK_VERDICTS = HERE / "quick-verdicts.yaml"
LINTED_SUFFIXES = (".py", ".json", ".yaml", ".yml", ".env", ".sh", ".bash")  # .sh/.bash: launchers (`lint.launch`)
# Files of the repository's root that lint reads about the project itself, taken whatever `paths` says: whether it is
# an installable package (`reach.packaged`) and the oldest torch it requires or its README installs (`pins.torch_floor`).
PROJECT_FILES = ("pyproject.toml", "setup.cfg", "setup.py", "environment.yml", "environment.yaml", "README.md", "README.rst")
# What a finished extraction records first: the commit and what it took (a cache made with less is redone).
STAMP = "{commit} {suffixes} {project}"
VERDICT_VALUES = ("true", "false", "debatable")
MODES = {"default": None, "ALL": "ALL"}


split_of = benchdocs.split_of


@dataclass
class Judged:
    key: str
    repo: str
    rule: str
    severity: str
    at: str
    message: str
    verdict: str | None  # None: not judged yet
    why: str = ""


@dataclass
class Tally:
    files: int = 0
    repos: int = 0
    findings: list[Judged] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        c = Counter(j.verdict or "unjudged" for j in self.findings)
        return {"warn+err": len(self.findings), "true": c["true"], "false": c["false"], "debatable": c["debatable"],
                "unjudged": c["unjudged"],
                "false errors": sum(j.verdict == "false" and j.severity == "error" for j in self.findings),
                "errors": sum(j.severity == "error" for j in self.findings)}


# --- extraction -------------------------------------------------------------------------------------------------

def _project_file(path: str) -> bool:
    """A root file in PROJECT_FILES, or a requirements list where `pins` looks for one (``requirements*.txt`` at the
    root, ``requirements/*.txt``)."""
    folder, _, name = path.rpartition("/")
    requirements = name.endswith(".txt") and ((not folder and name.startswith("requirements")) or folder == "requirements")
    return requirements or (not folder and name in PROJECT_FILES)


def _wanted(path: str, paths: list[str] | None) -> bool:
    if _project_file(path):
        return True
    if not path.endswith(LINTED_SUFFIXES) and not path.endswith(".env"):
        return False
    if not paths:
        return True
    return any(path == p or (p.endswith("/") and path.startswith(p)) for p in paths)


def extract(entry: dict, mirrors: Path, cache: Path) -> tuple[Path | None, list[str]]:
    """The repository's lintable files at its commit under cache/NAME (reused when already complete);
    returns the folder (None when the mirror or commit is absent) and the notes on what is missing."""
    name, repo, commit = entry["name"], entry["repo"], entry["commit"]
    dest = cache / name
    done = dest / ".ecosystem-commit"
    stamp = STAMP.format(commit=commit, suffixes=",".join(LINTED_SUFFIXES), project=",".join(PROJECT_FILES) + ",requirements")
    if done.exists() and done.read_text().split("\n")[0] == stamp:
        return dest, [n for n in done.read_text().split("\n")[1:] if n]
    gitdir = mirrors / repo.replace("/", "+") / "repo"
    fetch_hint = f"run `fetch github:{repo}`"
    if not gitdir.exists():
        return None, [f"{name}: no mirror at {gitdir}; {fetch_hint}"]
    ls = subprocess.run(["git", "--git-dir", str(gitdir), "ls-tree", "-r", "-z", commit], capture_output=True)
    if ls.returncode != 0:
        return None, [f"{name}: commit {commit[:12]} not in {gitdir} ({ls.stderr.decode().strip()}); {fetch_hint} "
                      "and check that it still holds the commit"]
    blobs = []
    for rec in ls.stdout.split(b"\0"):
        if not rec:
            continue
        meta, path = rec.split(b"\t", 1)
        mode, kind, sha = meta.split()
        p = path.decode("utf-8", "surrogateescape")
        if kind == b"blob" and mode != b"120000" and _wanted(p, entry.get("paths")):
            blobs.append((sha.decode(), p))
    if dest.exists():
        subprocess.run(["rm", "-rf", str(dest)], check=True)
    dest.mkdir(parents=True)
    missing = []
    proc = subprocess.Popen(["git", "--git-dir", str(gitdir), "cat-file", "--batch"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)
    for sha, p in blobs:
        proc.stdin.write(sha.encode() + b"\n")
        proc.stdin.flush()
        header = proc.stdout.readline().split()
        if len(header) < 3 or header[1] == b"missing":
            missing.append(p)
            continue
        data = proc.stdout.read(int(header[2]))
        proc.stdout.read(1)
        out = dest / p
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(data)
    proc.stdin.close()
    proc.wait()
    notes = [f"{name}: blob missing from the mirror, skipped: {p} (`fetch github:{repo}` again may complete it)"
             for p in missing]
    done.write_text("\n".join([stamp, *notes]))
    return dest, notes


# --- lint and judge -------------------------------------------------------------------------------------------

def lint_tree(name: str, tree: Path, select: str | None, verdicts: dict) -> tuple[int, list[Judged], list[str]]:
    settings = LintSettings(jobs=1)
    if select:
        settings = settings.override(select=rule_ids(select.split(","), "--select"))
    report = lint_paths([tree], settings)
    cache: dict[str, list[str] | None] = {}
    out = []
    ranks: dict[str, int] = {}
    for f in sorted(report.findings, key=lambda f: (f.location.file or "", f.location.line or 0, f.rule_id)):
        if f.severity.rank < Severity.WARNING.rank:
            continue
        rel = Path(f.location.file).resolve().relative_to(tree.resolve()).as_posix() if f.location.file else ""
        if rel and rel not in cache:  # the line text read from the cache folder, the path as in the repository
            cache[rel] = Path(f.location.file).read_text(encoding="utf-8", errors="replace").splitlines()
        moved = replace(f, location=replace(f.location, file=rel or None))
        key = f"{name}:{fingerprint(moved, cache)}"
        # A baseline's fingerprint is the rule, the file and the line's text, so two findings of one rule on
        # identical lines of a file (two `def forward(` of two Functions) share it; each gets a verdict of its own:
        # the second and later, in line order, carry their rank.
        rank = ranks[key] = ranks.get(key, 0) + 1
        if rank > 1:
            key = f"{key}#{rank}"
        v = verdicts.get(key) or {}
        out.append(Judged(key, name, f.rule_id, f.severity.value, f"{rel}:{f.location.line}", f.message,
                          v.get("verdict"), v.get("why", "")))
    errors = [f"{name}: input error {e.file}: {e.message}" for e in report.errors]
    return len(report.checked), out, errors


def load_verdicts(path: Path) -> dict:
    if not path.exists():
        return {}
    data = yaml.safe_load(path.read_text()) or {}
    for key, v in data.items():
        verdict = str(v.get("verdict")).lower() if v.get("verdict") is not None else None
        if verdict not in VERDICT_VALUES:
            raise SystemExit(f"{path}: {key}: verdict must be one of {VERDICT_VALUES}, not {v.get('verdict')!r}")
        v["verdict"] = verdict
    return data


def per100(n: int, files: int) -> float:
    return round(100 * n / max(files, 1), 2)


COLUMNS = ["split", "rules", "repos", "files", "warn+err", "true", "false", "debatable", "unjudged", "false errors"]


def rows_for(tallies: dict[tuple[str, str], Tally]) -> list[list[object]]:
    rows = []
    order = {"tune": 0, "heldout": 1, "all": 2}
    for (split, mode), t in sorted(tallies.items(), key=lambda kv: (order[kv[0][0]], kv[0][1] != "default")):
        c = t.counts()
        rows.append([split, mode, t.repos, t.files] + [f"{c[k]} ({per100(c[k], t.files)})" for k in COLUMNS[4:]])
    return rows


def lint_repo(name: str, tree: Path, verdicts: dict) -> tuple[dict, list[str]]:
    """One repository linted in every mode: its row of `run` and the notes on its input errors."""
    row: dict = {"repo": name, "split": split_of(name)}
    notes: list[str] = []
    for mode, select in MODES.items():
        start = time.perf_counter()
        files, judged, errors = lint_tree(name, tree, select, verdicts)
        row[mode] = (files, judged, round(time.perf_counter() - start, 1))
        if mode == "ALL":
            notes += errors
    return row, notes


def run(entries: list[dict], trees: dict[str, Path], verdicts: dict, show: bool, jobs: int = 1) -> tuple[dict, list[dict], list[str]]:
    tallies: dict[tuple[str, str], Tally] = {}
    per_repo = []
    notes: list[str] = []
    names = [e["name"] for e in entries if e["name"] in trees]
    if jobs > 1:
        from concurrent.futures import ProcessPoolExecutor

        # One repository per task, in the manifest's order: the rows, tallies and output are those of a serial run.
        with ProcessPoolExecutor(jobs) as pool:
            done = list(pool.map(lint_repo, names, [trees[n] for n in names], [verdicts] * len(names)))
    else:
        done = [lint_repo(n, trees[n], verdicts) for n in names]
    for row, errors in done:
        notes += errors
        split = row["split"]
        for mode in MODES:
            files, judged, _ = row[mode]
            for key in ((split, mode), ("all", mode)):
                t = tallies.setdefault(key, Tally())
                t.files += files
                t.repos += 1
                t.findings += judged
        per_repo.append(row)
    if show:
        seen = set()
        for row in per_repo:
            for j in row["ALL"][1]:
                if j.key in seen:
                    continue
                seen.add(j.key)
                default = any(d.key == j.key for d in row["default"][1])
                print(f"[{row['split']}] {j.repo} {j.at}: {j.severity} {j.rule}{'' if default else ' (ALL only)'}: "
                      f"{j.verdict or 'UNJUDGED'} -- {j.why or j.message}")
    return tallies, per_repo, notes


def repo_table(per_repo: list[dict]) -> str:
    rows = []
    for r in per_repo:
        cells = [r["repo"], r["split"], r["default"][0]]
        for mode in MODES:
            c = Counter(j.verdict or "unjudged" for j in r[mode][1])
            cells.append(f"{len(r[mode][1])} ({c['true']}/{c['false']}/{c['debatable']}" + (f"/{c['unjudged']}?" if c["unjudged"] else "") + ")")
        rows.append(cells)
    return benchdocs.markdown_table(["repo", "split", "files", "default: warn+err (true/false/debatable)", "ALL: warn+err (true/false/debatable)"], rows)


def report(tallies, per_repo, notes, unjudged_limit: int | None = None) -> str:
    lines = ["Counts, and per 100 files in parentheses:", "", benchdocs.markdown_table(COLUMNS, rows_for(tallies)), ""]
    lines += [repo_table(per_repo), ""]
    unjudged = {j.key: j for t in tallies.values() for j in t.findings if j.verdict is None}
    lines.append(f"Not judged yet: {len(unjudged)}")
    for j in list(unjudged.values())[:unjudged_limit]:
        lines.append(f"- UNJUDGED {j.key}: {{verdict: , rule: {j.rule}, at: '{j.at}', why: ''}}  # {j.severity}: {j.message[:160]}")
    if notes:
        lines += ["", "Notes:", ""] + [f"- {n}" for n in notes]
    return "\n".join(lines)


def findings_json(per_repo: list[dict]) -> list[dict]:
    """Every warning and error of every mode, one dict each (`--json-out`), for `compare` against a later run."""
    return [{"mode": mode, "key": j.key, "repo": j.repo, "split": row["split"], "rule": j.rule, "severity": j.severity,
             "at": j.at, "message": j.message, "verdict": j.verdict}
            for row in per_repo for mode in MODES for j in row[mode][1]]


def compare(old: list[dict], new: list[dict]) -> str:
    """What changed between two `--json-out` files: on the tune split each finding that came or went (the key, its
    verdict and message); on the held-out split only counts by verdict, as the split discipline reads it."""
    def keyed(items: list[dict]) -> dict[tuple[str, str], dict]:
        return {(f["mode"], f["key"]): f for f in items}

    before, after = keyed(old), keyed(new)
    lines = []
    for label, gone_or_new in (("new", [after[k] for k in after.keys() - before.keys()]),
                               ("gone", [before[k] for k in before.keys() - after.keys()])):
        for f in sorted(gone_or_new, key=lambda f: (f["split"], f["mode"], f["key"])):
            if f["split"] == "tune":
                lines.append(f"{label} [{f['mode']}] {f['key']} {f['at']}: {f['severity']} {f['rule']}: "
                             f"{f['verdict'] or 'UNJUDGED'} -- {f['message'][:200]}")
        held = Counter((f["mode"], f["verdict"] or "unjudged") for f in gone_or_new if f["split"] != "tune")
        if held:
            lines.append(f"{label} held-out: " + ", ".join(f"{mode} {verdict} {n}" for (mode, verdict), n in sorted(held.items())))
    return "\n".join(lines)


# --- quick mode -----------------------------------------------------------------------------------------------

QUICK_TREE = {
    "train_fp16.py": '''import torch

model = torch.nn.Linear(8, 8).cuda()
opt = torch.optim.AdamW(model.parameters())
for x in range(3):
    with torch.autocast("cuda"):
        loss = model(torch.randn(4, 8, device="cuda")).sum()
    loss.backward()
    opt.step()
''',
    "ds_config.json": '''{
  "train_micro_batch_size_per_gpu": 4,
  "gradient_accumulation_steps": 8,
  "bf16": {"enabled": true},
  "zero_optimization": {"stage": 1}
}
''',
}


def quick(show: bool, verdicts_path: Path = QUICK_VERDICTS, jobs: int = 1, json_out: Path | None = None) -> int:
    """A generated two-file tree and bench/ecosystem/quick-verdicts.yaml: self-contained, a few seconds."""
    verdicts = load_verdicts(verdicts_path)
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "quick"
        tree.mkdir()
        for rel, text in QUICK_TREE.items():
            (tree / rel).write_text(text)
        entries = [{"name": "quick"}]
        tallies, per_repo, notes = run(entries, {"quick": tree}, verdicts, show, jobs)
        print(report(tallies, per_repo, notes))
        if json_out:
            json_out.write_text(json.dumps(findings_json(per_repo), indent=1))
    return 0


# --- main -------------------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("AMPDOCTOR_ECOSYSTEM_CACHE", "/work/ecosystem-cache")),
                        help="folder the repositories are extracted into (default /work/ecosystem-cache)")
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"), help="folder of the fetched mirrors")
    parser.add_argument("--manifest", type=Path, default=MANIFEST)
    parser.add_argument("--verdicts", type=Path, help="verdict store (default bench/ecosystem/verdicts.yaml; "
                        "with --quick, bench/ecosystem/quick-verdicts.yaml)")
    parser.add_argument("--only", help="comma-separated repository names (no docs written)")
    parser.add_argument("--show", action="store_true", help="list every warning and error with its verdict")
    parser.add_argument("--quick", action="store_true", help="a generated tiny tree and tiny verdict file; no docs")
    parser.add_argument("--no-docs", action="store_true", help="do not write docs/benchmarks.md")
    parser.add_argument("--split", choices=("tune", "heldout"), help="only the repositories of this split (no docs written)")
    parser.add_argument("--judged", action="store_true",
                        help="only the repositories with a judged finding in the verdict store (no docs written)")
    parser.add_argument("--jobs", type=int, default=1, help="repositories linted at once (processes)")
    parser.add_argument("--json-out", type=Path, help="write every warning and error of every mode as JSON")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("OLD", "NEW"),
                        help="print what changed between two --json-out files (held-out: counts only) and exit")
    args = parser.parse_args(argv)
    if args.compare:
        old, new = (json.loads(p.read_text()) for p in args.compare)
        print(compare(old, new) or "no change")
        return 0
    if args.quick:
        return quick(args.show, args.verdicts or QUICK_VERDICTS, args.jobs, args.json_out)
    start = time.perf_counter()
    entries = yaml.safe_load(args.manifest.read_text())["repos"]
    verdicts = load_verdicts(args.verdicts or VERDICTS)
    if args.only:
        wanted = set(args.only.split(","))
        entries = [e for e in entries if e["name"] in wanted]
    if args.split:
        entries = [e for e in entries if split_of(e["name"]) == args.split]
    if args.judged:
        judged_repos = {key.split(":", 1)[0] for key in verdicts}
        entries = [e for e in entries if e["name"] in judged_repos]
    subset = bool(args.only or args.split or args.judged)
    trees, notes = {}, []
    for e in entries:
        tree, missing = extract(e, args.mirrors, args.cache)
        notes += missing
        if tree is not None:
            trees[e["name"]] = tree
    tallies, per_repo, lint_notes = run(entries, trees, verdicts, args.show, args.jobs)
    text = report(tallies, per_repo, notes + lint_notes)
    print(text)
    if args.json_out:
        args.json_out.write_text(json.dumps(findings_json(per_repo), indent=1))
    absent = [e["name"] for e in entries if e["name"] not in trees]
    if not (args.no_docs or subset or absent):
        body = (benchdocs.stamp(time.perf_counter() - start) + "\n\n"
                + "Repositories (bench/ecosystem/repos.yaml, split by sha256 of the name): "
                + ", ".join(f"{e['name']} `{e['commit'][:8]}` ({split_of(e['name'])})" for e in entries) + "\n\n"
                + report(tallies, per_repo, notes + lint_notes, unjudged_limit=20))
        benchdocs.write_block("ecosystem", "## Ecosystem precision (bench/ecosystem/ecosystem.py)", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
