"""Mutation run: can the tests fail? Silence each registered detector in turn and run the tests; a detector is
*killed* when at least one test fails with it silenced, and *survives* when every test still passes (nothing
checks what it finds).

Every kind of detector in `ampdoctor.core.registry.detectors()` is a mutant (policy, code, runtime, ranks,
numerics), and so are the catalog signatures of each rule that has some (its ``explain`` detector). Silencing goes
through `bench/mutation_site.py`, installed as ``sitecustomize`` on ``PYTHONPATH``: it reaches the pytest process
and every ``python -m ampdoctor`` the tests spawn, and no production code knows about it. (A test that replaces
``PYTHONPATH`` in the environment of its subprocess does not see the mutant there.)

To finish on a small machine, each mutant runs ``pytest -x`` in stages and stops at the first failing test:
1. the rule's own fixtures (``tests/rules/test_rule_fixtures.py -k RULE``), a few seconds;
2. the rule tests and those of the detector's kind (``tests/rules`` then ``tests/python_lint`` for code, ...);
3. only for survivors, the whole suite, without the tests that already fail with nothing silenced (a baseline
   run finds those).
Two mutants run at a time, against the working tree as it is: do not edit it during a run (a file caught half
written fails every test, and the mutant of the moment counts as killed). ``--quick`` runs stage 1 only, for one
covered detector (or those of ``--only``), after a control run with nothing silenced, and writes nothing.

    .venv/bin/python bench/mutation.py                 # every detector; writes docs/benchmarks.md
    .venv/bin/python bench/mutation.py --only AMP004:code:grad_scaler_with_bf16 --no-write
    .venv/bin/python bench/mutation.py --quick
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchdocs import markdown_table, stamp, write_block  # noqa: E402

from ampdoctor.core import catalog  # noqa: E402
from ampdoctor.core.registry import detectors  # noqa: E402

KIND_TESTS: dict[str, tuple[str, ...]] = {
    "policy": ("tests/rules", "tests/configs", "tests/test_policy.py", "tests/test_train_step.py"),
    "code": ("tests/rules", "tests/python_lint", "tests/test_fix_rope.py"),
    "runtime": ("tests/rules", "tests/audit"),
    "ranks": ("tests/rules", "tests/audit/test_audit_distributed.py"),
    "numerics": ("tests/rules", "tests/numerics"),
    "explain": ("tests/rules", "tests/test_explain.py"),
}
STAGE_TIMEOUT_S = 1800
LEGEND = ("Each detector silenced in turn (its registration, name and source location kept, its hits gone; a rule's "
          "`explain` detector is its catalog signatures, silenced by matching no text). *stage*: where the first test "
          "failed: 1 the rule's own fixtures (`tests/rules/test_rule_fixtures.py -k RULE`), 2 `tests/rules` and the tests "
          "of the detector's kind, 3 the whole suite. *asked*: the silenced detector was called in some process (the "
          "pytest process or a `python -m ampdoctor` a test spawned).")
QUICK = ("AMP004:code:grad_scaler_with_bf16",)
_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.MULTILINE)


@dataclass(frozen=True)
class Mutant:
    rule_id: str
    kind: str
    name: str

    @property
    def key(self) -> str:
        return f"{self.rule_id}:{self.kind}:{self.name}"


@dataclass(frozen=True)
class Outcome:
    mutant: Mutant
    killed: bool
    first_failure: str  # the failing test, or why there is none
    stage: int  # the stage that killed it; 0 when it survived
    asked: bool  # the silenced detector was called in some process
    seconds: float


def all_mutants() -> list[Mutant]:
    """Every registered detector, then every rule's signatures (its explain detector), in rule-id order."""
    found = [Mutant(d.rule_id, d.kind, d.fn.__name__) for d in detectors()]
    found += [Mutant(r.id, "explain", "signatures") for r in catalog() if r.signatures]
    return sorted(found, key=lambda m: (m.rule_id, m.kind, m.name))


def _site_dir() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="ampdoctor-mutation-"))
    shutil.copy(Path(__file__).with_name("mutation_site.py"), folder / "sitecustomize.py")
    return folder


def pytest_run(targets: list[str], *, mutant: Mutant | None, site: Path, log: Path | None,
               extra: tuple[str, ...] = (), stop_first: bool = True) -> tuple[int, str]:
    """Run pytest on ``targets`` with ``mutant`` silenced: (exit status, combined output)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT / "src")]), "OMP_NUM_THREADS": "1",
           "AMPDOCTOR_MUTANT": mutant.key if mutant else "", "AMPDOCTOR_MUTANT_LOG": str(log) if log else ""}
    cmd = [sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider", "-n", "0",
           *(["-x"] if stop_first else []), *extra, *targets]
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=STAGE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return 124, "timeout"
    return proc.returncode, proc.stdout + proc.stderr


def stages(mutant: Mutant, whole: bool) -> list[tuple[list[str], tuple[str, ...]]]:
    """(targets, extra pytest arguments) of each stage, most relevant first."""
    out: list[tuple[list[str], tuple[str, ...]]] = [(["tests/rules/test_rule_fixtures.py"], ("-k", mutant.rule_id))]
    out.append(([t for t in KIND_TESTS[mutant.kind]], ()))
    if whole:
        out.append((["tests"], ()))
    return out


def run_mutant(mutant: Mutant, site: Path, *, whole: bool, deselect: tuple[str, ...] = (), first: int = 1, last: int = 3) -> Outcome:
    start = time.perf_counter()
    log = Path(tempfile.mkstemp(prefix="mutant-", suffix=".log")[1])
    try:
        for number, (targets, extra) in enumerate(stages(mutant, whole), 1):
            if not first <= number <= last:
                continue
            args = extra + tuple(a for d in deselect for a in ("--deselect", d)) if number == 3 else extra
            status, output = pytest_run(targets, mutant=mutant, site=site, log=log, extra=args)
            if status == 1:
                failed = _FAILED.search(output)
                return Outcome(mutant, True, failed[1] if failed else "(failure not named)", number,
                               bool(log.read_text()), time.perf_counter() - start)
            if status not in (0, 5):  # 5: nothing collected (a -k that selects no test)
                return Outcome(mutant, False, f"pytest exit status {status}: {output[-300:]!r}", 0,
                               bool(log.read_text()), time.perf_counter() - start)
        return Outcome(mutant, False, "no test failed", 0, bool(log.read_text()), time.perf_counter() - start)
    finally:
        log.unlink(missing_ok=True)


def baseline_failures(site: Path) -> tuple[str, ...]:
    """Tests that fail with nothing silenced: a mutant's failure there says nothing about the mutant."""
    status, output = pytest_run(["tests"], mutant=None, site=site, log=None, stop_first=False)
    return tuple(_FAILED.findall(output)) if status == 1 else ()


def run_all(mutants: list[Mutant], *, whole: bool, jobs: int, last: int = 2) -> tuple[list[Outcome], tuple[str, ...]]:
    """Stages 1-2 for every mutant, then, if any survive, a baseline run of the whole suite and stage 3 (the whole
    suite without the baseline's failures) for the survivors."""
    site = _site_dir()
    try:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            outcomes = list(pool.map(lambda m: run_mutant(m, site, whole=False, last=last), mutants))
            survivors = [o.mutant for o in outcomes if not o.killed]
            if not (whole and survivors):
                return outcomes, ()
            deselect = baseline_failures(site)
            again = dict(zip([m.key for m in survivors],
                             pool.map(lambda m: run_mutant(m, site, whole=True, deselect=deselect, first=3), survivors)))
        return [again.get(o.mutant.key, o) for o in outcomes], deselect
    finally:
        shutil.rmtree(site, ignore_errors=True)


def table(outcomes: list[Outcome]) -> str:
    rows = [[f"`{o.mutant.rule_id}` {o.mutant.name}", o.mutant.kind, "killed" if o.killed else "**survived**",
             f"`{o.first_failure}`" if o.killed else o.first_failure, o.stage or "-", "yes" if o.asked else "no",
             f"{o.seconds:.0f}"] for o in outcomes]
    return markdown_table(["detector", "kind", "killed?", "first failing test", "stage", "asked", "s"], rows)


def summary(outcomes: list[Outcome]) -> str:
    killed = sum(o.killed for o in outcomes)
    survivors = ", ".join(o.mutant.key for o in outcomes if not o.killed) or "none"
    return f"{killed}/{len(outcomes)} detectors killed (survivors: {survivors})"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="stage 1 only, with a control; one covered detector unless --only; no docs")
    parser.add_argument("--only", help="comma-separated RULE:KIND:NAME keys (see --list)")
    parser.add_argument("--list", action="store_true", help="print the mutant keys and exit")
    parser.add_argument("--jobs", type=int, default=2, help="mutants run at a time (default 2)")
    parser.add_argument("--no-write", action="store_true", help="print instead of writing docs/benchmarks.md")
    parser.add_argument("--no-whole", action="store_true", help="stages 1-2 only: no whole-suite run for survivors")
    return parser


def _selected(args: argparse.Namespace, parser: argparse.ArgumentParser) -> list[Mutant]:
    mutants = all_mutants()
    wanted = tuple(args.only.split(",")) if args.only else QUICK if args.quick else None
    if not wanted:
        return mutants
    unknown = set(wanted) - {m.key for m in mutants}
    if unknown:
        parser.error(f"no such detector: {sorted(unknown)}; --list shows them")
    return [m for m in mutants if m.key in wanted]


def control_passes(mutant: Mutant) -> bool:
    """Stage 1 of `mutant` passes with nothing silenced: without that, a kill says nothing about the mutant."""
    targets, extra = stages(mutant, whole=False)[0]
    site = _site_dir()
    try:
        passed = pytest_run(targets, mutant=None, site=site, log=None, extra=extra)[0] == 0
    finally:
        shutil.rmtree(site, ignore_errors=True)
    print(f"control (nothing silenced, {' '.join(targets + list(extra))}): {'passed' if passed else 'FAILED'}")
    return passed


def main(argv: list[str] | None = None) -> int:
    """0 when every detector run was killed (and, with --quick, the control passed), else 1."""
    parser = _parser()
    args = parser.parse_args(argv)
    mutants = _selected(args, parser)
    if args.list:
        print("\n".join(m.key for m in mutants))
        return 0
    control = control_passes(mutants[0]) if args.quick else True
    start = time.perf_counter()
    outcomes, deselect = run_all(mutants, whole=not (args.quick or args.no_whole), jobs=max(1, min(args.jobs, 2)),
                                 last=1 if args.quick else 2)
    body = "\n\n".join([stamp(time.perf_counter() - start), LEGEND, table(outcomes), summary(outcomes) + "."])
    if deselect:
        body += "\n\nFailing with nothing silenced (left out of stage 3): " + ", ".join(f"`{d}`" for d in deselect)
    print(body)
    if not (args.quick or args.no_write or args.only or args.no_whole):
        write_block("mutation", "## Mutation run: every detector has a test that fails without it", body)
    return 0 if control and all(o.killed for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
