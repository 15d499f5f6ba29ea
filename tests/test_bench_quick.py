"""Every benchmark in bench/ runs in its --quick mode (so none can rot), and the reference GPT trainer runs under
torchrun with two CPU ranks, as docs/benchmarks.md tells a reader to run it."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"


def load(relpath: str):
    """A bench script as a module (they are scripts, not a package)."""
    path = BENCH / relpath
    spec = importlib.util.spec_from_file_location(f"bench_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve string annotations through sys.modules
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def docs(monkeypatch, tmp_path):
    """docs/benchmarks.md redirected: a quick run must not write it."""
    benchdocs = load("benchdocs.py")
    sys.modules["benchdocs"] = benchdocs  # the scripts import it by this name
    monkeypatch.setattr(benchdocs, "DOCS", tmp_path / "benchmarks.md")
    yield benchdocs.DOCS
    del sys.modules["benchdocs"]


def test_torchrun_two_cpu_ranks_train_and_rank0_reports_val_loss(tmp_path):
    out = tmp_path / "run.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "bench/gpt/train.py", "--tiny", "--steps", "3", "--device", "cpu", "--json-out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    # all of stderr: a rank that aborts (seen once, rank 1 under a loaded 2-core machine) says why above torchrun's summary
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-20000:]
    val_lines = [line for line in proc.stdout.splitlines() if line.startswith("step     3  val ")]
    assert len(val_lines) == 1  # rank 0 only
    summary = json.loads(out.read_text())
    assert summary["world_size"] == 2 and summary["steps"] == 3
    assert f"{summary['val']:.4f}" in val_lines[0]
    assert summary["val"] < summary["history"][0]["val"]  # three steps at lr 3e-3 do lower the loss


def test_rope_variants_differ_only_where_designed():
    sys.path.insert(0, str(BENCH / "gpt"))
    from model import Rotary

    rotary = Rotary(head_dim=32, max_len=512, base=10000.0, variant="fp32")
    q = torch.randn(2, 2, 512, 32, generator=torch.Generator().manual_seed(0)).bfloat16()
    out = {}
    for variant in ("fp32", "bf16", "bf16-table", "bf16-math", "ampdoctor"):
        rotary.set_variant(variant)
        out[variant] = rotary(q, q)[0]
        assert out[variant].dtype == torch.bfloat16
    # The incident's code on bf16 tensors: cos/sin cached in bf16, x1 * cos + x2 * sin in bf16.
    cos, sin = rotary.cos32.bfloat16(), rotary.sin32.bfloat16()
    x1, x2 = q.chunk(2, dim=-1)
    incident = torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
    assert torch.equal(out["bf16"], incident)
    assert (out["ampdoctor"].float() - out["fp32"].float()).abs().max() <= 2**-7  # one bf16 rounding apart at most
    for variant in ("bf16", "bf16-table", "bf16-math"):
        assert not torch.equal(out[variant], out["fp32"])


def test_rope_table_experiment_quick(docs, capsys):
    assert load("rope_table_experiment.py").main(["--quick"]) == 0
    text = capsys.readouterr().out
    for row in ("| fp32 | ", "| bf16 | ", "| ampdoctor | ", "| bf16 − fp32 | all positions |", "95% CI"):
        assert row in text
    assert not docs.exists()


def test_experiment_statistics():
    experiment = load("rope_table_experiment.py")
    assert experiment.t_quantile(0.975, 2) == 4.303
    assert abs(experiment.t_quantile(0.975, 60) - 2.0003) < 1e-3  # Cornish-Fisher beyond the table
    mean, std, half_width = experiment.mean_ci([1.0, 2.0, 3.0])
    assert (mean, std) == (2.0, 1.0) and abs(half_width - 4.303 / 3**0.5) < 1e-9
    # Paired std 0.0035: a +-0.005 interval needs n with t(n-1) * 0.0035 / sqrt(n) < 0.005.
    half, power = experiment.seeds_to_resolve(0.0035)
    assert half == 5 and power == 6


@pytest.mark.parametrize("script, argv", [("audit_overhead.py", ["--every", "3"]), ("audit_fake70b.py", []), ("lint_python_bench.py", []),
                                          ("realworld.py", ["--markdown"]), ("rope_bench.py", [])])


def test_benchmark_quick_mode(script, argv, docs, capsys):
    assert load(script).main(["--quick", *argv]) == 0
    out = capsys.readouterr().out
    assert "|---" in out  # each prints a table
    if script == "audit_overhead.py":  # the sampled run: 6 steps, one in 3 recorded in each of its two audits
        assert "| every 3 | 6 | 2 |" in out and "after recording stops" in out
    assert not docs.exists()


def test_fuzz_quick_mode(docs, capsys):
    assert load("fuzz.py").main(["--quick"]) == 0  # 0: no input raised, hung or broke an invariant
    out = capsys.readouterr().out
    assert "| config:deepspeed | 5 | 0 | 0 | 0 |" in out and "| cli | 5 | 0 | 0 | 0 | - | - |" in out
    assert "CLI exit codes: " in out
    assert not docs.exists()


def test_mutation_quick_mode_kills_a_covered_detector(docs, capsys):
    """Silencing AMP004's code detector fails its own fixture, and the same stage passes with nothing silenced."""
    assert load("mutation.py").main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert "control (nothing silenced, tests/rules/test_rule_fixtures.py -k AMP004): passed" in out
    assert ("| `AMP004` grad_scaler_with_bf16 | code | killed | `tests/rules/test_rule_fixtures.py::test_code_fixture[AMP004-code/bad"
            in out)
    assert "| 1 | yes |" in out  # killed in stage 1, and the silenced detector was asked
    assert "1/1 detectors killed (survivors: none)" in out
    assert not docs.exists()


def test_mutation_silences_a_detector_inside_a_spawned_cli(tmp_path):
    """The mutant reaches `python -m ampdoctor` started by a test: the sitecustomize on PYTHONPATH patches there too."""
    (tmp_path / "sitecustomize.py").write_text((BENCH / "mutation_site.py").read_text())
    log = tmp_path / "asked.log"
    text = "RuntimeError: \"_amp_foreach_non_finite_check_and_unscale_cuda\" not implemented for 'BFloat16'"

    def explain(mutant: str) -> list[str]:
        env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT / 'src'}", "AMPDOCTOR_MUTANT": mutant,
               "AMPDOCTOR_MUTANT_LOG": str(log)}
        proc = subprocess.run([sys.executable, "-m", "ampdoctor", "explain", "--format", "json", text], env=env,
                              capture_output=True, text=True, timeout=120)
        # a rule whose signatures are silenced may still be offered as closest by wording: no match, not counted
        return [c["id"] for c in json.loads(proc.stdout)["candidates"] if c["basis"] == "signature"]

    assert explain("")[0] == "AMP004" and not log.exists()
    assert "AMP004" not in explain("AMP004:explain:signatures")
    assert log.read_text().split()[1] == "AMP004:explain:signatures"


def test_mutation_reports_a_detector_its_stage_does_not_kill(docs, capsys):
    """The bench can say no: AMP117's runtime detector gives the same line as its policy predicate, so the fixture
    walker (stage 1) passes without it; a measurement test in `tests/rules` (stage 2) is what kills it."""
    key = "AMP117:runtime:half_grads_accumulated"
    assert load("mutation.py").main(["--quick", "--only", key]) == 1
    out = capsys.readouterr().out
    assert "| `AMP117` half_grads_accumulated | runtime | **survived** | no test failed | - | yes |" in out
    assert f"0/1 detectors killed (survivors: {key})" in out
    assert not docs.exists()


def test_ecosystem_quick_counts_verdicts_and_lists_unjudged(docs, capsys, tmp_path):
    eco = load("ecosystem/ecosystem.py")
    assert eco.split_of("nanoGPT") == "tune" and eco.split_of("torchtune") == "heldout"  # the manifest's rule
    assert eco.main(["--quick"]) == 0
    text = capsys.readouterr().out
    # quick-verdicts.yaml: the AMP107 finding judged true, the AMP117 one false; nothing left unjudged
    assert "| tune | default | 1 | 2 | 2 (100.0) | 1 (50.0) | 1 (50.0) | 0 (0.0) | 0 (0.0) | 0 (0.0) |" in text
    assert "Not judged yet: 0" in text
    # with only the true verdict kept, the AMP117 finding is listed as not judged and no longer counted false
    kept = [line for line in eco.QUICK_VERDICTS.read_text().splitlines() if "AMP117" not in line]
    partial = tmp_path / "verdicts.yaml"
    partial.write_text("\n".join(kept) + "\n")
    assert eco.main(["--quick", "--verdicts", str(partial)]) == 0
    text = capsys.readouterr().out
    assert "| tune | default | 1 | 2 | 2 (100.0) | 1 (50.0) | 0 (0.0) | 0 (0.0) | 1 (50.0) | 0 (0.0) |" in text
    assert "Not judged yet: 1" in text
    assert "- UNJUDGED quick:" in text and "rule: AMP117, at: 'ds_config.json:4'" in text
    assert not docs.exists()  # --quick writes no docs


def test_ecosystem_runs_repositories_in_processes_and_compares_two_runs_by_split(docs, capsys, tmp_path):
    eco = load("ecosystem/ecosystem.py")
    serial, parallel = tmp_path / "serial.json", tmp_path / "parallel.json"
    assert eco.main(["--quick", "--json-out", str(serial)]) == 0
    assert eco.main(["--quick", "--jobs", "2", "--json-out", str(parallel)]) == 0
    findings = json.loads(serial.read_text())
    assert findings == json.loads(parallel.read_text())  # a pool of processes changes nothing that is counted
    assert {(f["mode"], f["rule"], f["verdict"]) for f in findings} >= {("default", "AMP107", "true"), ("default", "AMP117", "false")}
    capsys.readouterr()
    # a finding gone from the tune split is named; a held-out one is counted only
    gone = [f for f in findings if f["rule"] == "AMP117"]
    held = [dict(f, split="heldout", key="other:" + f["key"]) for f in gone]
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(json.dumps(findings + held))
    new.write_text(json.dumps([f for f in findings if f["rule"] != "AMP117"]))
    assert eco.main(["--compare", str(old), str(new)]) == 0
    out = capsys.readouterr().out
    assert f"gone [default] {gone[0]['key']} ds_config.json:4: " in out and ": false -- " in out
    assert "gone held-out: ALL false 1, default false 1" in out
    assert "other:" not in out
    assert eco.main(["--compare", str(serial), str(parallel)]) == 0
    assert capsys.readouterr().out.strip() == "no change"


def test_recall_quick_finds_the_synthetic_bugs_before_their_fix_and_none_after(docs, capsys):
    recall = load("recall/recall.py")
    assert recall.main(["--quick"]) == 0  # 0 only if each synthetic bug's rule fires at its lines, and nothing after
    out = capsys.readouterr().out
    assert "| synthetic-grad-scaler-bf16 | tune | AMP004 | yes/yes |" in out
    assert "| synthetic-autocast-without-dtype | tune | AMP107 | yes/yes |" in out
    assert "| all | 2 | 2 | 2/2 (100%) | 2/2 (100%) | 2/2 (100%) | 2/2 (100%) | 0 (0) | 0 (0) | 1 | 1/1 (100%) | 1/1 (100%) | 2/2 (100%) |" in out
    assert recall.split_of("synthetic-grad-scaler-bf16") == "tune"  # sha256 % 3 != 0


def test_recall_tells_a_note_at_the_bug_lines_from_a_warning(docs):
    recall = load("recall/recall.py")
    inc = recall.Incident.from_entry({"name": "n", "repo": "o/r", "fix_commit": "0" * 40, "files": ["a.py"], "class": "c"})
    inc.hits["before:default"] = [("AMP002", "a.py", 3, "info")]
    assert inc.found("default") and not inc.found("default", warning=True)
    inc.hits["before:default"].append(("AMP002", "a.py", 4, "warning"))
    assert inc.found("default", warning=True)


def test_recall_counts_a_finding_of_the_rule_the_fix_removed_anywhere_in_the_changed_file(docs):
    recall = load("recall/recall.py")
    inc = recall.Incident.from_entry({"name": "n", "repo": "o/r", "fix_commit": "0" * 40, "files": ["a.py"], "class": "c",
                                      "rule": "AMP136"})
    inc.bug_lines = {"a.py": [10]}
    clip = ("AMP136", "a.py", 40, "warning")
    said = "`clip_grad_norm` clips gradients that `self.scaler` scaled (line 27)"
    # the fix inserted the remedy at line 10: the clip, 30 lines away, is no longer flagged
    assert recall.resolved(inc, [clip], [said], [], []) == [clip]
    # still flagged after the fix (its cited line moved): not resolved
    assert recall.resolved(inc, [clip], [said], [("AMP136", "a.py", 42, "warning")], [said.replace("27", "29")]) == []
    # another rule, or a file the fix did not change: not this incident's
    assert recall.resolved(inc, [("AMP108", "a.py", 1, "info")], ["x"], [], []) == []
    assert recall.resolved(inc, [("AMP136", "b.py", 40, "warning")], [said], [], []) == []


def test_recall_runtime_reproductions_name_manifest_incidents_and_existing_drivers(docs):
    recall = load("recall/recall.py")
    names = {inc.name for inc in recall.load(recall.MANIFEST)}
    assert set(recall.RUNTIME) <= names, set(recall.RUNTIME) - names
    missing = [driver for driver, _ in recall.RUNTIME.values() if not (recall.RUNTIME_DIR / driver).is_file()]
    assert not missing, missing


def test_archsweep_quick(docs, capsys, tmp_path):
    """bench/archsweep --quick: llama, gpt2, bert[masked] each one audited bf16-mixed step, clean and with two
    injected faults; the faults are found, the clean llama step has no finding, no ampdoctor failure."""
    out = tmp_path / "archsweep.json"
    assert load("archsweep/archsweep.py").main(["--quick", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    results = {r["job"]: r for r in json.loads(out.read_text())}
    llama = results["llama/causal/clean"]
    assert llama["step_ok"] and llama["findings"] == [], llama
    assert all(r.get("step_ok") and r.get("failure") is None for r in results.values() if r.get("injected", True)), results
    assert any(f["id"] == "AMP002" for f in results["llama/causal/inject:AMP002"]["findings"])
    assert results["gpt2/causal/inject:AMP002"]["injected"] is False  # no rotary table to plant into
    for arch in ("llama/causal", "gpt2/causal", "bert/masked"):
        assert any(f["id"] == "AMP214" and f["severity"] == "error" for f in results[f"{arch}/inject:AMP214"]["findings"])
    assert "| AMP214 | 3 | 3 | 3 | 100% |" in text and "ampdoctor failures (" in text and ": 0\n" in text
    assert not docs.exists()


def test_explain_bench_quick_answers_its_handful_right_and_writes_no_docs(docs, capsys):
    bench = load("explain/explain_bench.py")
    assert bench.main(["--quick"]) == 0  # 0 only if each of the handful is right and nothing wrong is said with confidence
    out = capsys.readouterr().out
    assert "| split | texts counted | n | top-1 | top-3 | confident wrong | guesses |" in out
    assert "| tune | catalog |" in out and "| heldout | pending |" in out
    assert not docs.exists()


def test_ecosystem_gives_findings_on_identical_lines_a_verdict_key_each(tmp_path):
    # Two Functions' `def forward(ctx, x, w):` lines have the same text, so their findings share a baseline
    # fingerprint; the bench keys the second with its rank, so that each is judged on its own code.
    eco = load("ecosystem/ecosystem.py")
    function = '''
class {name}(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        return x @ w

    @staticmethod
    def backward(ctx, g):
        return g, g
'''
    (tmp_path / "train.py").write_text("import torch\n" + function.format(name="A") + function.format(name="B") + '''

def step(x, w):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        return A.apply(x, w) + B.apply(x, w)
''')
    _, judged, _ = eco.lint_tree("t", tmp_path, "AMP110", {})
    keys = [(j.key, j.at) for j in judged]
    assert len(keys) == 2 and keys[1][0] == keys[0][0] + "#2", keys
    assert [at for _, at in keys] == ["train.py:5", "train.py:14"]


def test_ecosystem_extracts_the_root_files_that_say_what_the_project_is():
    # lint reads them for the project itself (an installable package? which torch?), whatever folders are linted
    eco = load("ecosystem/ecosystem.py")
    assert eco._wanted("pyproject.toml", ["src/"]) and eco._wanted("setup.cfg", None)
    assert eco._wanted("requirements-dev.txt", ["src/"]) and eco._wanted("requirements/base.txt", None)
    assert not eco._wanted("docs/requirements.txt", None) and not eco._wanted("data/vocab.txt", None)
    assert not eco._wanted("sub/pyproject.toml", None) and not eco._wanted("docs/README.md", None)
    # the root README's install commands pin the torch it is set up with (`pins.torch_floor`)
    assert eco._wanted("README.md", ["src/"]) and eco._wanted("README.rst", None) and not eco._wanted("CHANGELOG.md", None)


def test_explain_replay_can_run_this_checkouts_explain_over_an_old_trees_catalog(docs, tmp_path):
    # --calibration: the old tree's signatures, read by the explain.py given (here a stand-in that never answers).
    replay = load("explain/replay.py")
    text = "ValueError: Attempting to unscale FP16 gradients."
    own = replay._explain_with_tree("HEAD", [text], tmp_path / "trees")
    assert own[0][0][0] == "AMP105"  # the tree's own explain
    overlay = tmp_path / "explain.py"
    overlay.write_text("def explain(text, limit=None):\n    return []\n")
    assert replay._explain_with_tree("HEAD", [text], tmp_path / "trees", overlay) == [[[], False, ""]]


def test_cuda_incidents_rewrites_each_script_for_the_gpu_and_reads_its_audit_on_the_cpu(tmp_path):
    # The GPU bench cannot run here: its rewrite is checked on every script, and one script is run as written
    # (`--cpu`'s path) through the plain run, the audit and the report reading the table is made of.
    bench = load("cuda_incidents.py")
    for name in bench.EXPECTED:
        text = bench.cuda_copy(bench.INCIDENTS / name, tmp_path).read_text()
        compile(text, name, "exec")
        assert 'torch.set_default_device("cuda")' in text and 'autocast("cpu"' not in text and 'GradScaler("cpu"' not in text
    (tmp_path / "cpu").mkdir()
    row = bench.one("incident4_gradscaler_bf16.py", tmp_path / "cpu", cuda=False)
    assert row["plain_rc"] == 0 and row["audit_rc"] == 1  # the CPU runs it silently; the audit does not
    assert row["audit_findings"][0].startswith("AMP004 error")


def test_explain_halves_leaves_out_what_only_the_half_explained_could_have_taught(docs):
    # A pattern that matches a text of the half being explained and none of the other half's is taken away (with an
    # `unless` or `doubt` fitted the same way); one the other half matches, or that no text matches, stays.
    halves = load("explain/halves.py")
    from ampdoctor.core import Rule, Severity, Signature

    rule = Rule(id="AMPX", name="x", severity=Severity.WARNING, summary="", why="", fix="", sources=(),
                signatures=(Signature("only b"), Signature("in both", doubt="b doubt"), Signature("in none"),
                            Signature("only a", unless="a unless")),
                context=(Signature("ctx b"),), detectors=("explain",))
    kept, = halves.fitted_without((rule,), ["only a, in both, a unless"], ["only b ctx b b doubt in both"])
    assert [s.pattern for s in kept.signatures] == ["in both", "in none", "only a"]
    assert kept.signatures[0].doubt == "" and kept.signatures[2].unless == "a unless" and kept.context == ()
    names = [f"t{i}" for i in range(40)]
    assert {halves.half(n) for n in names} == {0, 1}  # both halves are used
