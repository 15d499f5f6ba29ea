"""Recall on real incidents: does ampdoctor find public mixed-precision bugs at the lines their fix changed?

For each incident of bench/recall/incidents.yaml (a real bug with the commit that fixed it) the bench extracts the
listed files at ``before`` (the fix's first parent unless the entry says otherwise) and at the fix from the
repositories fetched to this machine (``fetch github:owner/name`` puts them under /work/.mirror), into a cache
folder that keeps the repository-relative paths, so that configs next to code are linted together. Then:

* **lint found**: a finding (default rules, and separately ``--select ALL``) within +-3 lines of a line the fix
  changed, in the before version, of any severity (a note counts: it names the line); "of which as a warning or
  error" counts only findings the default output stresses. "right rule" also asks that one of those findings is the
  manifest's rule.
* **after fix**: findings within +-3 lines of the lines the fix wrote, in the fixed version (should be 0).
* **gone after the fix** (a second reading, not the issue's measure): a finding of the manifest's rule (default
  rules) anywhere in a file the fix changed, before the fix, that the fixed version no longer has (the same rule and
  message, line numbers aside). A fix that inserts its remedy away from the flagged line (an `unscale_` at the top
  of a loop, for a clip further down) is found by this reading and missed by the +-3 lines one.
* **explain top-1 / top-3**: on incidents whose issue quotes an error text, is the manifest's rule the first /
  among the first three candidates of ``ampdoctor explain``.
* **runtime**: where a CPU reproduction with the real pre-fix code is cheap (``RUNTIME`` below: a driver in
  bench/recall/runtime/ imports the upstream module unmodified from the extracted tree and runs one training step
  under ``ampdoctor.audit``), the audit's findings before and after the fix; found = the manifest's rule fires
  before the fix.

The split (tune 2/3, heldout 1/3) is computed from the incident's name, never stored:
``"tune" if int(sha256(name).hexdigest(), 16) % 3 != 0 else "heldout"``. Detectors may be tuned on the tune split
only; the heldout numbers are the ones that say whether a change generalizes.

``--quick`` builds a tiny synthetic git repository (two bugs and their fix) in a temporary folder and runs the
whole pipeline on it: self-contained, no fetched repository needed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))  # benchdocs

import benchdocs  # noqa: E402

MANIFEST = HERE / "incidents.yaml"
DEFAULT_MIRRORS = Path(os.environ.get("AMPDOCTOR_MIRRORS", "/work/.mirror"))
DEFAULT_CACHE = Path(tempfile.gettempdir()) / "ampdoctor-recall-cache"
WINDOW = 3
RUNTIME_DIR = HERE / "runtime"
# incident -> (driver in bench/recall/runtime/, further files of the repository the driver imports). A driver that
# imports a whole package (PEFT, diffusers) reads it from the project extraction, which `--alone` leaves out.
RUNTIME: dict[str, tuple[str, tuple[str, ...]]] = {
    "litgpt-rope-cache-half": ("litgpt_rope_cache_half.py", ("lit_gpt/config.py", "lit_gpt/rmsnorm.py")),
    "torchtitan-rope-bf16-apply": ("torchtitan_rope_bf16_apply.py", ()),
    "olmo-sdpa-mask-fill-nan": ("olmo_sdpa_mask_fill_nan.py", ("olmo/config.py", "olmo/aliases.py", "olmo/beam_search.py",
                                                                "olmo/exceptions.py", "olmo/initialization.py")),
    "openrlhf-actor-logprobs-bf16": ("openrlhf_actor_logprobs_bf16.py", ("openrlhf/models/loss.py", "openrlhf/models/utils.py",
                                                                          "openrlhf/models/ring_attn_utils.py")),
    "peft-vera-buffers-half": ("peft_vera_buffers_half.py", ()),
    "peft-boft-fp32-outputs": ("peft_boft_fp32_outputs.py", ()),
    "peft-ia3-bf16-merge-promotion": ("peft_ia3_bf16_merge_promotion.py", ()),
    "peft-intruders-svd-half": ("peft_intruders_svd_half.py", ()),
    "diffusers-mrope-under-autocast": ("diffusers_mrope_under_autocast.py", ()),
    "diffusers-freeu-fft-complexhalf": ("diffusers_freeu_fft_complexhalf.py", ()),
}
HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


split_of = benchdocs.split_of


@dataclass
class Incident:
    name: str
    repo: str
    issue: str
    fix_commit: str
    files: list[str]
    cls: str
    rule: str
    error_text: str | None = None
    before: str | None = None
    split: str = ""
    status: str = "ok"  # ok | missing-repo | missing-commit | missing-files
    missing: list[str] = field(default_factory=list)
    bug_lines: dict[str, list[int]] = field(default_factory=dict)  # before version: lines the fix changed
    fixed_lines: dict[str, list[int]] = field(default_factory=dict)  # after version: lines the fix wrote
    before_dir: Path | None = None
    after_dir: Path | None = None
    hits: dict[str, list[tuple[str, str, int, str]]] = field(default_factory=dict)  # variant -> (rule, file, line, severity)
    gone: list[tuple[str, str, int, str]] = field(default_factory=list)  # the rule's findings the fix removed (`resolved`)
    crashes: list[str] = field(default_factory=list)
    explain_ids: list[str] = field(default_factory=list)
    runtime: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # before/after -> (rule, severity)

    @classmethod
    def from_entry(cls, e: dict) -> "Incident":
        return cls(name=e["name"], repo=e["repo"], issue=str(e.get("issue", "")), fix_commit=str(e["fix_commit"]),
                   files=list(e["files"]), cls=e["class"], rule=e.get("rule", "none"), error_text=e.get("error_text"),
                   before=e.get("before"), split=split_of(e["name"]))

    @property
    def measured(self) -> bool:
        return self.status == "ok"

    def found(self, variant: str, warning: bool = False) -> bool:
        """A finding at the bug's lines; with `warning`, one of warning or error severity (a note counts otherwise)."""
        return any(not warning or severity in ("warning", "error") for *_, severity in self.hits.get(f"before:{variant}", []))

    def right_rule(self, variant: str) -> bool:
        return any(rule == self.rule for rule, *_ in self.hits.get(f"before:{variant}", []))

    def after(self, variant: str) -> int:
        return len(self.hits.get(f"after:{variant}", []))

    def runtime_rules(self, version: str) -> list[str]:
        return sorted({rule for rule, severity in self.runtime.get(version, []) if severity in ("warning", "error")})

    def explain_rank(self) -> int | None:
        return self.explain_ids.index(self.rule) + 1 if self.rule in self.explain_ids else None


# ----------------------------------------------------------------------------------------------------------- git


def git(gitdir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "--git-dir", str(gitdir), *args], capture_output=True)


def mirror_of(mirrors: Path, repo: str) -> Path | None:
    """The bare git directory of a fetched repository (fetch's layout: MIRRORS/owner+name/repo)."""
    base = mirrors / repo.replace("/", "+")
    for cand in (base / "repo", base, base / ".git"):
        if (cand / "HEAD").exists() and (cand / "objects").exists():
            return cand
    return None


def changed_lines(gitdir: Path, before: str, after: str, path: str) -> tuple[list[int], list[int]]:
    """Lines of ``path`` the fix changed: (in the before version, in the after version).

    A pure insertion marks the two before-lines around the insertion point; a pure deletion the two after-lines
    around where the lines were."""
    out = git(gitdir, "diff", "--no-color", "--no-ext-diff", "-U0", before, after, "--", path).stdout.decode("utf-8", "replace")
    old: set[int] = set()
    new: set[int] = set()
    for line in out.splitlines():
        m = HUNK.match(line)
        if not m:
            continue
        a, b = int(m[1]), int(m[2]) if m[2] is not None else 1
        c, d = int(m[3]), int(m[4]) if m[4] is not None else 1
        old.update(range(a, a + b) if b else (max(a, 1), a + 1))
        new.update(range(c, c + d) if d else (max(c, 1), c + 1))
    return sorted(old), sorted(new)


def prepare(inc: Incident, mirrors: Path, cache: Path) -> None:
    """Extract the incident's files at both commits into the cache and compute the changed lines."""
    gitdir = mirror_of(mirrors, inc.repo)
    if gitdir is None:
        inc.status = "missing-repo"
        inc.missing.append(f"repository {inc.repo}: fetch github:{inc.repo}")
        return
    fix = git(gitdir, "rev-parse", "--verify", "--quiet", inc.fix_commit + "^{commit}").stdout.decode().strip()
    if not fix:
        inc.status = "missing-commit"
        inc.missing.append(f"commit {inc.fix_commit} not in {gitdir} (fetch github:{inc.repo} again for a newer snapshot)")
        return
    before = git(gitdir, "rev-parse", "--verify", "--quiet", (inc.before or fix + "^1") + "^{commit}").stdout.decode().strip()
    if not before:
        inc.status = "missing-commit"
        inc.missing.append(f"parent of {fix} not in {gitdir}")
        return
    inc.before_dir = cache / inc.name / "before"
    inc.after_dir = cache / inc.name / "after"
    for d in (inc.before_dir, inc.after_dir):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    extra = [p for p in RUNTIME.get(inc.name, ("", ()))[1] if p not in inc.files]
    if PROJECT:
        for rev, root in ((before, inc.before_dir), (fix, inc.after_dir)):
            extract_project(gitdir, rev, root)
    for path in [*inc.files, *extra]:
        for rev, root in ((before, inc.before_dir), (fix, inc.after_dir)):
            blob = git(gitdir, "cat-file", "-p", f"{rev}:{path}")
            if blob.returncode != 0:
                # Absent at that commit (a file the fix created or deleted) or a blob the snapshot lacks.
                exists = git(gitdir, "ls-tree", rev, "--", path).stdout.strip()
                if exists:
                    inc.missing.append(f"blob of {path} at {rev[:10]} (large file left out of the snapshot)")
                continue
            target = root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(blob.stdout)
        if path in extra:
            continue
        old, new = changed_lines(gitdir, before, fix, path)
        if old and (inc.before_dir / path).exists():
            inc.bug_lines[path] = old
        if new and (inc.after_dir / path).exists():
            inc.fixed_lines[path] = new
    if not inc.bug_lines:
        inc.status = "missing-files"


# Lint each incident's files inside their repository at the same commit (`ampdoctor lint FILES --project TREE`): what
# other files set up (a trainer's autocast, a config's bf16) judges them, as it does for a user who lints a checkout.
# `--alone` lints the listed files by themselves, as the first runs of this bench did.
PROJECT = True
_PROJECT_FILES = ("*.py", "*.json", "*.yaml", "*.yml", "*.toml")


def extract_project(gitdir: Path, rev: str, root: Path) -> None:
    """The repository's Python, config and shell launcher files at `rev`, for context; a snapshot that lacks some blobs gives what it
    has (the listed files are extracted one by one afterwards, and reported when missing)."""
    names = git(gitdir, "ls-tree", "-r", "-z", "--name-only", rev).stdout.decode(errors="replace").split("\0")
    wanted = [n for n in names if n.endswith((".py", ".json", ".yaml", ".yml", ".toml", ".sh", ".bash")) and "/." not in "/" + n]
    batch = subprocess.run(["git", "--git-dir", str(gitdir), "cat-file", "--batch"], input="".join(f"{rev}:{n}\n" for n in wanted).encode(),
                           capture_output=True)
    data, pos = batch.stdout, 0
    for name in wanted:
        header_end = data.find(b"\n", pos)
        if header_end < 0:
            break
        header = data[pos:header_end].split()
        if len(header) != 3 or header[1] != b"blob":
            pos = header_end + 1
            continue
        size = int(header[2])
        body = data[header_end + 1: header_end + 1 + size]
        pos = header_end + 1 + size + 1
        if size > (1 << 20):
            continue
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(body)


# ------------------------------------------------------------------------------------------------------ ampdoctor


def ampdoctor(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "ampdoctor", *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


def lint(tree: Path, select_all: bool, files: list[str] | None = None) -> tuple[list[tuple[str, str, int, str]], list[str], list[str]]:
    """Findings (rule, repository-relative file, line, severity) of ``ampdoctor lint`` on one extracted tree (or on `files` of
    it, inside the tree as their project), crashes, and the findings' messages (in the findings' order)."""
    args = ["lint", "--no-config", "--format", "json", "--exit-zero", "--jobs", "1"]
    if select_all:
        args += ["--select", "ALL"]
    targets = [str(tree)]
    if files is not None:
        targets = [str(tree / f) for f in files if (tree / f).is_file()] or [str(tree)]
        args += ["--project", str(tree)]
    try:
        proc = ampdoctor(*args, *targets)
    except subprocess.TimeoutExpired:
        return [], [f"lint {'--select ALL ' if select_all else ''}{tree}: timed out"], []
    crashes = []
    if proc.returncode not in (0,) or "Traceback" in proc.stderr:
        crashes.append(f"lint {'--select ALL ' if select_all else ''}{tree}: exit {proc.returncode}: {proc.stderr.strip()[-1500:]}")
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return [], crashes or [f"lint {tree}: output is not JSON"], []
    for err in report.get("errors") or []:
        crashes.append(f"lint {tree}: input error: {json.dumps(err)[:500]}")
    findings, messages = [], []
    for f in report.get("findings", []):
        loc = f.get("location") or {}
        file, line = loc.get("file"), loc.get("line")
        if not file or not line:
            continue
        try:
            rel = Path(file).resolve().relative_to(tree.resolve()).as_posix()
        except ValueError:
            rel = file
        findings.append((f["id"], rel, int(line), f.get("severity", "")))
        messages.append(str(f.get("message", "")))
    return findings, crashes, messages


def resolved(inc: Incident, before: list[tuple[str, str, int, str]], before_msgs: list[str],
             after: list[tuple[str, str, int, str]], after_msgs: list[str]) -> list[tuple[str, str, int, str]]:
    """The findings of the incident's rule, in the files the fix changed, that the fixed version no longer has: the
    same rule, file and message with its numbers left out (a line cited in the message moves with the fix)."""
    def key(f: tuple[str, str, int, str], message: str) -> tuple[str, str, str]:
        return f[0], f[1], re.sub(r"\d+", "#", message)
    kept = {key(f, m) for f, m in zip(after, after_msgs)}
    return [f for f, m in zip(before, before_msgs) if f[0] == inc.rule and f[1] in inc.bug_lines and key(f, m) not in kept]


def near(findings: list[tuple[str, str, int, str]], lines: dict[str, list[int]]) -> list[tuple[str, str, int, str]]:
    return [f for f in findings if f[1] in lines and any(abs(f[2] - ln) <= WINDOW for ln in lines[f[1]])]


def explain(text: str) -> tuple[list[str], list[str]]:
    proc = ampdoctor("explain", "--format", "json", text, timeout=120)
    try:
        return [c["id"] for c in json.loads(proc.stdout).get("candidates", [])], []
    except (json.JSONDecodeError, AttributeError):
        return [], [f"explain {text!r}: exit {proc.returncode}: {proc.stderr.strip()[-1500:]}"]


def audit_run(inc: Incident, version: str, tree: Path) -> None:
    """One runtime reproduction: the driver prints the audit's findings as a JSON list on its last line."""
    driver = RUNTIME_DIR / RUNTIME[inc.name][0]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    try:
        proc = subprocess.run([sys.executable, str(driver), str(tree)], capture_output=True, text=True, env=env, timeout=300)
    except subprocess.TimeoutExpired:
        inc.crashes.append(f"runtime {driver.name} on the {version} version: timed out")
        return
    try:
        inc.runtime[version] = [tuple(f) for f in json.loads(proc.stdout.strip().splitlines()[-1])]
    except (json.JSONDecodeError, IndexError):
        inc.crashes.append(f"runtime {driver.name} on the {version} version failed: {proc.stderr.strip()[-1500:]}")


def measure(inc: Incident, runtime: bool = True) -> None:
    if not inc.measured:
        return
    if runtime and inc.name in RUNTIME:
        audit_run(inc, "before", inc.before_dir)
        audit_run(inc, "after", inc.after_dir)
    for variant, select_all in (("default", False), ("ALL", True)):
        files = list(inc.files) if PROJECT else None
        before, crashes, before_msgs = lint(inc.before_dir, select_all, files)
        inc.hits[f"before:{variant}"] = near(before, inc.bug_lines)
        inc.crashes += crashes
        after, crashes, after_msgs = lint(inc.after_dir, select_all, files)
        inc.hits[f"after:{variant}"] = near(after, inc.fixed_lines)
        inc.crashes += crashes
        if variant == "default":
            inc.gone = resolved(inc, before, before_msgs, after, after_msgs)
    if inc.error_text:
        inc.explain_ids, crashes = explain(inc.error_text)
        inc.crashes += crashes


# -------------------------------------------------------------------------------------------------------- report


def pct(n: int, d: int) -> str:
    return f"{n}/{d} ({100 * n / d:.0f}%)" if d else "-"


def summary_rows(incidents: list[Incident]) -> list[list[object]]:
    rows = []
    for split in ("tune", "heldout", "all"):
        sel = [i for i in incidents if split in ("all", i.split)]
        m = [i for i in sel if i.measured]
        texts = [i for i in m if i.error_text and i.rule != "none"]
        in_cat = [i for i in m if i.rule != "none"]
        rows.append([
            split, len(sel), len(m),
            pct(sum(i.found("default") for i in m), len(m)),
            pct(sum(i.found("default", warning=True) for i in m), len(m)),
            pct(sum(i.found("ALL") for i in m), len(m)),
            pct(sum(i.right_rule("ALL") for i in in_cat), len(in_cat)),
            f"{sum(i.after('default') > 0 for i in m)} ({sum(i.after('default') for i in m)})",
            f"{sum(i.after('ALL') > 0 for i in m)} ({sum(i.after('ALL') for i in m)})",
            len(texts),
            pct(sum(i.explain_rank() == 1 for i in texts), len(texts)),
            pct(sum((i.explain_rank() or 99) <= 3 for i in texts), len(texts)),
            pct(sum(bool(i.gone) for i in in_cat), len(in_cat)),
        ])
    return rows


SUMMARY_HEADER = ["split", "incidents", "measured", "lint found (default)", "of which as a warning or error", "lint found (ALL)",
                  "right rule at the lines (ALL; incidents with a rule)", "after fix: incidents with findings (findings), default",
                  "after fix, ALL", "error texts (rule in catalog)", "explain top-1", "explain top-3",
                  "right rule gone after the fix (default; anywhere in the changed files; incidents with a rule)"]


def class_rows(incidents: list[Incident]) -> list[list[object]]:
    groups: dict[tuple[str, str], list[Incident]] = defaultdict(list)
    for i in incidents:
        if i.measured:
            groups[(i.cls, i.rule)].append(i)
    rows = []
    for (cls, rule), incs in sorted(groups.items(), key=lambda kv: (kv[0][1] == "none", kv[0][1], kv[0][0])):
        cells = [cls, rule]
        for split in ("tune", "heldout"):
            s = [i for i in incs if i.split == split]
            cells.append(f"{sum(i.found('default') for i in s)}/{sum(i.found('ALL') for i in s)} of {len(s)}" if s else "-")
        cells.append(", ".join(sorted({r for i in incs for r, *_ in i.hits.get("before:ALL", [])})) or "-")
        rows.append(cells)
    return rows


CLASS_HEADER = ["class", "rule", "tune: found default/ALL of n", "heldout: found default/ALL of n", "rules at the bug lines (ALL)"]


def show_rows(incidents: list[Incident]) -> list[list[object]]:
    rows = []
    for i in sorted(incidents, key=lambda i: (i.split, i.name)):
        if not i.measured:
            rows.append([i.name, i.split, i.rule, i.status, "-", "-", "-", "-", "-"])
            continue
        rules = sorted({r for r, *_ in i.hits.get("before:ALL", [])})
        rank = i.explain_rank() if i.error_text else None
        rows.append([i.name, i.split, i.rule,
                     ("yes" if i.found("default") else "no") + "/" + ("yes" if i.found("ALL") else "no"),
                     ", ".join(rules) or "-", f"{i.after('default')}/{i.after('ALL')}",
                     ("-" if not i.error_text else (f"rank {rank}" if rank else "top 3: " + (", ".join(i.explain_ids[:3]) or "none"))),
                     "crash" if i.crashes else "", "yes" if i.gone else "no"])
    return rows


SHOW_HEADER = ["incident", "split", "rule", "found default/ALL", "rules at the lines (ALL)", "after fix default/ALL", "explain", "",
               "rule gone after the fix"]


def runtime_rows(incidents: list[Incident]) -> list[list[object]]:
    return [[i.name, i.split, i.rule, ", ".join(i.runtime_rules("before")) or "-", ", ".join(i.runtime_rules("after")) or "-",
             "yes" if i.rule in i.runtime_rules("before") else "no", "yes" if i.rule in i.runtime_rules("after") else "no"]
            for i in sorted(incidents, key=lambda i: (i.split, i.name)) if "before" in i.runtime]


RUNTIME_HEADER = ["incident", "split", "rule", "audit before the fix (warning/error rules)", "audit after the fix",
                  "rule found before", "rule still after"]


def run(incidents: list[Incident], mirrors: Path, cache: Path, jobs: int, runtime: bool = True) -> None:
    for inc in incidents:
        prepare(inc, mirrors, cache)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        list(pool.map(lambda inc: measure(inc, runtime), incidents))


def render(incidents: list[Incident], show: bool) -> str:
    parts = ["Per split (a finding counts when it is within +-3 lines of a line the fix changed):", "",
             benchdocs.markdown_table(SUMMARY_HEADER, summary_rows(incidents)), "",
             "Per class (found by lint with the default rules / with ALL, of n measured incidents):", "",
             benchdocs.markdown_table(CLASS_HEADER, class_rows(incidents))]
    rows = runtime_rows(incidents)
    if rows:
        parts += ["", "Runtime: the pre-fix and fixed upstream code, one CPU training step under `ampdoctor.audit`:", "",
                  benchdocs.markdown_table(RUNTIME_HEADER, rows)]
    if show:
        parts += ["", "Each incident:", "", benchdocs.markdown_table(SHOW_HEADER, show_rows(incidents))]
    return "\n".join(parts)


def problems(incidents: list[Incident]) -> list[str]:
    out = []
    for i in incidents:
        out += [f"{i.name}: missing {m}" for m in i.missing]
        out += [f"{i.name}: {c}" for c in i.crashes]
    return out


# ---------------------------------------------------------------------------------------------------- quick mode

SYNTH_BEFORE = '''import torch


def train_step(model, batch, optimizer, dtype=torch.bfloat16):
    scaler = torch.amp.GradScaler("cuda")
    with torch.autocast("cuda"):
        loss = model(batch)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.detach().cpu().float().item()
'''
SYNTH_AFTER = '''import torch


def train_step(model, batch, optimizer, dtype=torch.bfloat16):
    scaler = torch.amp.GradScaler("cuda", enabled=dtype == torch.float16)
    with torch.autocast("cuda", dtype=dtype):
        loss = model(batch)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.detach().cpu().float().item()
'''


def synthetic(tmp: Path) -> list[Incident]:
    """A tiny fetched-repository look-alike: MIRRORS/synthetic+amp/repo with a buggy commit and its fix."""
    work = tmp / "work"
    work.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.invalid",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.invalid", "GIT_CONFIG_GLOBAL": os.devnull,
           "GIT_CONFIG_NOSYSTEM": "1"}

    def g(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=work, env=env, check=True, capture_output=True, text=True).stdout.strip()

    g("init", "-q")
    (work / "train.py").write_text(SYNTH_BEFORE)
    g("add", "train.py")
    g("commit", "-qm", "train step")
    (work / "train.py").write_text(SYNTH_AFTER)
    g("commit", "-qam", "fix: GradScaler only for fp16, autocast with the configured dtype")
    fix = g("rev-parse", "HEAD")
    mirror = tmp / "mirrors" / "synthetic+amp" / "repo"
    mirror.parent.mkdir(parents=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(mirror)], env=env, check=True, capture_output=True)
    base = {"repo": "synthetic/amp", "issue": "synthetic", "fix_commit": fix, "files": ["train.py"]}
    return [Incident.from_entry({**base, "name": "synthetic-grad-scaler-bf16", "class": "grad-scaler-with-bf16", "rule": "AMP004",
                                 "error_text": "RuntimeError: \"_amp_foreach_non_finite_check_and_unscale_cuda\" not implemented for 'BFloat16'"}),
            Incident.from_entry({**base, "name": "synthetic-autocast-without-dtype", "class": "autocast-without-dtype", "rule": "AMP107"})]


# ---------------------------------------------------------------------------------------------------------- main


def load(manifest: Path) -> list[Incident]:
    entries = yaml.safe_load(manifest.read_text())
    names = [e["name"] for e in entries]
    dup = [n for n, c in Counter(names).items() if c > 1]
    if dup:
        raise SystemExit(f"duplicate incident names: {dup}")
    return [Incident.from_entry(e) for e in entries]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--manifest", type=Path, default=MANIFEST)
    parser.add_argument("--mirrors", type=Path, default=DEFAULT_MIRRORS, help="where fetch put the repositories")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="where the extracted files go")
    parser.add_argument("--only", help="comma-separated incident names")
    parser.add_argument("--split", choices=("tune", "heldout"),
                        help="measure and print one split only (tuning a detector: --split tune shows no heldout row)")
    parser.add_argument("--jobs", type=int, default=2, help="incidents linted at once")
    parser.add_argument("--show", action="store_true", help="list each incident's outcome")
    parser.add_argument("--quick", action="store_true", help="a synthetic repository in a temp folder; no docs")
    parser.add_argument("--no-docs", action="store_true", help="do not write docs/benchmarks.md")
    parser.add_argument("--json-out", type=Path, help="write each incident's outcome as JSON")
    parser.add_argument("--no-runtime", action="store_true", help="skip the runtime reproductions")
    parser.add_argument("--alone", action="store_true", help="lint the fixed files by themselves, not inside their repository")
    args = parser.parse_args(argv)
    global PROJECT
    PROJECT = not args.alone

    start = time.time()
    tmp = None
    if args.quick:
        tmp = Path(tempfile.mkdtemp(prefix="ampdoctor-recall-quick-"))
        incidents = synthetic(tmp)
        mirrors, cache = tmp / "mirrors", tmp / "cache"
    else:
        incidents = load(args.manifest)
        mirrors, cache = args.mirrors, args.cache
    if args.only:
        wanted = set(args.only.split(","))
        incidents = [i for i in incidents if i.name in wanted]
    if args.split:
        incidents = [i for i in incidents if i.split == args.split]
    try:
        run(incidents, mirrors, cache, args.jobs, runtime=not args.no_runtime)
        text = render(incidents, args.show or args.quick)
        print(text)
        issues = problems(incidents)
        if issues:
            print("\nMissing inputs and ampdoctor crashes:")
            for line in issues:
                print("  " + line)
        missing_repos = sorted({i.repo for i in incidents if i.status == "missing-repo"})
        if missing_repos:
            print("\nNot fetched (run the fetch tool for each, then rerun): " + " ".join(f"github:{r}" for r in missing_repos))
        if args.json_out:
            args.json_out.write_text(json.dumps([{
                "name": i.name, "repo": i.repo, "split": i.split, "class": i.cls, "rule": i.rule, "status": i.status,
                "bug_lines": i.bug_lines, "fixed_lines": i.fixed_lines,
                "hits": {k: [list(h) for h in v] for k, v in i.hits.items()},
                "explain": i.explain_ids, "runtime": i.runtime, "crashes": i.crashes, "missing": i.missing} for i in incidents], indent=1))
        if not args.quick and not args.no_docs:
            repos = sorted({i.repo for i in incidents})
            measured = sum(i.measured for i in incidents)
            body = "\n\n".join([
                benchdocs.stamp(time.time() - start),
                f"{len(incidents)} incidents ({measured} measured) from {len(repos)} repositories; split by "
                "`sha256(name) % 3` (0: heldout). Runtime reproductions: "
                f"{sum('before' in i.runtime for i in incidents)} (the others have no cheap CPU reproduction wired up).",
                render(incidents, args.show)])
            benchdocs.write_block("recall", "## Recall on real incidents (bench/recall/recall.py)", body)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    if args.quick:  # the synthetic bugs must be found before the fix and gone after it
        ok = all(i.right_rule("default") and i.after("default") == 0 for i in incidents)
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
