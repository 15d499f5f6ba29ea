"""`ampdoctor run` and `ampdoctor audit` end to end, in subprocesses like a user runs them."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INCIDENTS = os.path.join(ROOT, "examples", "incidents")


def ampdoctor(*args, cwd=ROOT, env=None):
    return subprocess.run([sys.executable, "-m", "ampdoctor", *args], cwd=cwd, capture_output=True, text=True, timeout=300, env=env)


def test_run_writes_the_report_when_the_script_fails_and_returns_its_exit_code(tmp_path):
    out = tmp_path / "report.json"
    proc = ampdoctor("run", "--policy", "bf16-true", "--format", "json", "--output", str(out), "examples/incidents/incident1_neox_rotary.py")
    assert proc.returncode == 1
    assert "RuntimeError: expected m1 and m2 to have the same dtype" in proc.stderr  # the script's own traceback
    assert "ampdoctor/audit" not in proc.stderr
    data = json.loads(out.read_text())
    # the report says the script failed, and with what
    assert data["info"]["script_failed"] is True and data["info"]["script_exit_code"] == 1
    assert data["info"]["exception"].startswith("RuntimeError: expected m1 and m2 to have the same dtype")
    assert (data["info"]["policy"], data["info"]["policy_source"]) == (str(__import__("ampdoctor").Policy.parse("bf16-true")), "given")
    chain = [f for f in data["findings"] if f["name"] == "implicit-dtype-promotion" and f["origin"]]
    assert chain[0]["origin"]["module"] == "blocks.0.attn" and chain[0]["related"][0]["module"] == "blocks.0.attn.pos_enc"


def test_run_passes_argv_and_stops_recording_after_max_steps(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        "import sys, torch\n"
        "assert __name__ == '__main__'\n"
        "print('argv', sys.argv[1:])\n"
        "m = torch.nn.Linear(4, 4)\n"
        "opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for step in range(3):\n"
        "    m(torch.randn(2, 4)).sum().backward()\n"
        "    opt.step(); opt.zero_grad()\n"
        "print('done', step)\n"
    )
    out = tmp_path / "r.json"
    proc = ampdoctor("run", "--policy", "fp32", "--format", "json", "-o", str(out), str(script), "--lr", "3")
    assert proc.returncode == 0, proc.stderr
    assert "argv ['--lr', '3']" in proc.stdout and "done 2" in proc.stdout
    data = json.loads(out.read_text())
    assert data["findings"] == []
    linear = [row for row in data["tables"][0]["rows"] if row[0] == "<root>"]
    # one recorded step: forward mm/addmm + backward, not three
    ops = dict(tok.split(":") for tok in linear[0][6].split())
    assert 0 < int(ops["fp32"]) < 20


def test_run_module_and_fail_on(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "train.py").write_text(
        "import torch\n"
        "x = torch.randn(4, 10, dtype=torch.bfloat16, requires_grad=True)\n"
        "torch.nn.functional.cross_entropy(x, torch.randint(0, 10, (4,))).backward()\n"
    )
    proc = ampdoctor("run", "--policy", "bf16-true", "-m", "pkg.train", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr  # loss-low-precision is a warning
    assert "loss-low-precision" in proc.stdout
    proc = ampdoctor("run", "--policy", "bf16-true", "--fail-on", "warning", "-m", "pkg.train", cwd=tmp_path)
    assert proc.returncode == 1


def test_bad_input_is_a_clear_message_and_exit_2(tmp_path, capsys):
    proc = ampdoctor("run", "missing_script.py")
    assert proc.returncode == 2 and "can't open file 'missing_script.py'" in proc.stderr and "Traceback" not in proc.stderr
    # The audit's bad configs through the CLI's own entry point in this process (the same code path as the console
    # script, without paying a torch + transformers import per case); an exception escaping would fail the test.
    from ampdoctor.cli import main

    def audit_cli(*args):
        code = main(["audit", "--hf-config", *map(str, args)])
        return code, capsys.readouterr().err

    code, err = audit_cli(tmp_path / "nope.json")
    assert code == 2 and "no such file" in err
    bad = tmp_path / "bad.json"
    bad.write_text("{\"hidden_size\": 8}")
    code, err = audit_cli(bad)
    assert code == 2 and "model_type" in err
    wrong_type = tmp_path / "wrong_type.json"
    wrong_type.write_text('{"model_type": "llama", "hidden_size": "x"}')
    code, err = audit_cli(wrong_type)
    assert code == 2 and f"{wrong_type}: invalid config" in err and "hidden_size" in err
    inconsistent = tmp_path / "inconsistent.json"
    inconsistent.write_text('{"model_type": "llama", "hidden_size": 60, "num_attention_heads": 7, "num_hidden_layers": 1, "vocab_size": 64}')
    code, err = audit_cli(inconsistent, "--fake")
    assert code == 2 and "not a multiple of the number of attention heads" in err


def test_hf_config_audit_of_a_step_that_raises_writes_its_report_and_exits_1(tmp_path, capsys):
    # A step that fails for a reason that has nothing to do with dtypes (positions past GPT-2's position table):
    # the run contract holds - a report that says the step failed and why, exit 1, no ampdoctor traceback.
    from ampdoctor.cli import main

    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "gpt2", "n_embd": 32, "n_layer": 1, "n_head": 2, "n_positions": 8, "vocab_size": 64}))
    out = tmp_path / "report.json"
    code = main(["audit", "--hf-config", str(cfg), "--seq-len", "16", "--format", "json", "-o", str(out)])
    # (a closed stream left to a library logger by an earlier test in this process prints "--- Logging error ---"
    # with its own traceback: that is logging's report about the stream, not an exception of the audit)
    assert code == 1 and "Traceback" not in capsys.readouterr().err.split("--- Logging error ---")[0]
    info = json.loads(out.read_text())["info"]
    assert info["script_failed"] is True and info["exception"].startswith("IndexError: index out of range")


def test_hf_config_audit_real_and_fake(tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                               "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256,
                               "torch_dtype": "bfloat16"}))  # a bf16 checkpoint's config: still audited as the policy holds it
    for extra in ([], ["--fake"]):
        proc = ampdoctor("audit", "--hf-config", str(cfg), "--seq-len", "32", "--batch-size", "2", "--format", "json", *extra)
        assert proc.returncode == 0, proc.stderr
        data = json.loads(proc.stdout)
        assert data["findings"] == [] and data["info"]["policy_source"] == "audit-default"
        rows = {r[0]: r for r in data["tables"][0]["rows"]}
        assert rows["model.layers.1.self_attn.q_proj"][6].startswith("bf16:")
    proc = ampdoctor("audit", "--hf-config", str(cfg), "--policy", "bf16-true", "--fake", "--seq-len", "32", "--format", "json")
    found = {(f["name"], f.get("details", {}).get("tensor")) for f in json.loads(proc.stdout)["findings"]}
    assert ("rope-cache-low-precision", "model.rotary_emb.inv_freq") in found


def test_json_and_sarif_on_stdout_stay_valid_when_the_script_prints(tmp_path):
    script = tmp_path / "noisy.py"
    script.write_text(
        "import os, torch\n"
        "print('step 0 loss 1.23')\n"
        "os.system('echo from a subprocess')\n"
        "m = torch.nn.Linear(4, 4).to(torch.bfloat16)\n"
        "opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "m(torch.randn(2, 4, dtype=torch.bfloat16)).float().sum().backward()\n"
        "opt.step()\n")
    for fmt in ("json", "sarif"):
        proc = ampdoctor("run", "--format", fmt, str(script), cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        document = json.loads(proc.stdout)  # one document: the script's output went to stderr
        assert "step 0 loss 1.23" in proc.stderr and "from a subprocess" in proc.stderr
        if fmt == "json":
            # without --policy the audit judges the policy the script ran, and says so
            assert document["info"]["policy_source"] == "inferred" and document["info"]["policy"].startswith("params=bf16,compute=bf16")
            assert "precision-config-mismatch" not in [f["name"] for f in document["findings"]]
        else:
            assert document["runs"][0]["automationDetails"] == {"id": "ampdoctor/run/"}


def _console_script() -> str:
    return str(Path(sys.executable).with_name("ampdoctor"))


def test_run_follows_pythons_contract_from_the_console_script(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "train.py").write_text("import sys\nprint('file', __file__)\nprint('path0', sys.path[0])\n")
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__main__.py").write_text("print('main', __file__)\n")
    (tmp_path / "s.py").write_text("print('script', __file__)\n")
    env = {**os.environ, "PYTHONPATH": ""}  # what an installed console script sees
    as_module = subprocess.run([_console_script(), "run", "-m", "pkg.train"], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert as_module.returncode == 0, as_module.stderr
    assert f"file {tmp_path / 'pkg' / 'train.py'}" in as_module.stdout and f"path0 {tmp_path}" in as_module.stdout
    script = subprocess.run([_console_script(), "run", "s.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert f"script {tmp_path / 's.py'}" in script.stdout  # absolute, as Python gives it
    folder = subprocess.run([_console_script(), "run", "app"], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert folder.returncode == 0 and f"main {tmp_path / 'app' / '__main__.py'}" in folder.stdout


def test_an_unwritable_output_fails_before_the_script_runs(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("open('ran', 'w').write('yes')\n")
    proc = ampdoctor("run", "--format", "json", "--output", str(tmp_path / "missing" / "r.json"), str(script), cwd=tmp_path)
    assert proc.returncode == 2 and "no such directory" in proc.stderr
    assert not (tmp_path / "ran").exists()


def test_a_failing_scripts_traceback_shows_the_users_frames_and_where_it_surfaced(capsys):
    import torch

    from ampdoctor.audit.runner import _print_user_traceback

    def user_step():
        return torch.nn.Linear(4, 4)(torch.randn(3, 5))  # the shape error surfaces inside torch's linear.py

    try:
        user_step()
    except RuntimeError as exc:
        _print_user_traceback(exc)
        short = capsys.readouterr().err
        _print_user_traceback(exc, verbose=True)
        full = capsys.readouterr().err
    assert "in user_step" in short and "torch/nn/modules/linear.py" in short  # the user's frame and the innermost one
    assert "torch/nn/modules/module.py" not in short and "library frames not shown: 2 in torch; `ampdoctor run -v`" in short
    assert "torch/nn/modules/module.py" in full and "not shown" not in full
