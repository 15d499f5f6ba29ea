import json
import subprocess
import sys

import ampdoctor
from ampdoctor.cli import main


def test_version(capsys):
    try:
        main(["--version"])
    except SystemExit as exc:
        assert exc.code == 0
    assert capsys.readouterr().out.strip() == f"ampdoctor {ampdoctor.__version__}"


def test_console_script_and_module_agree():
    via_module = subprocess.run([sys.executable, "-m", "ampdoctor", "--version"], capture_output=True, text=True)
    assert via_module.returncode == 0 and via_module.stdout.strip() == f"ampdoctor {ampdoctor.__version__}"


def test_no_command_prints_help_and_exits_2(capsys):
    assert main([]) == 2
    assert "COMMAND" in capsys.readouterr().err


def test_output_file(tmp_path):
    out = tmp_path / "candidates.json"
    assert main(["explain", "--format", "json", "--output", str(out), "Attempting to unscale FP16 gradients."]) == 0
    assert '"grad-scaler-with-fp16-params"' in out.read_text()


def test_unwritable_output_is_a_usage_error(tmp_path, capsys):
    assert main(["explain", "--output", str(tmp_path / "missing" / "x.txt"), "Expected BFloat16, got Float"]) == 2
    assert "cannot write" in capsys.readouterr().err


def test_explain_limit_below_one_is_a_usage_error(capsys):
    # --limit 0 printed "No rule in the ampdoctor catalog matches" for a text a rule matches; a negative limit
    # silently dropped the best candidates from the end
    for limit in ("0", "-1"):
        assert main(["explain", "--limit", limit, "RuntimeError: expected scalar type BFloat16 but found Float"]) == 2
        assert "--limit" in capsys.readouterr().err


def test_a_reader_that_goes_away_ends_the_command_quietly():
    """`ampdoctor rules --format json | head -c 10`: the pipe closes before the command writes. A traceback there
    is ampdoctor's own failure shown to the user; the command ends as SIGPIPE would end it (141), with nothing on
    stderr."""
    for command in (["rules", "--format", "json"], ["explain", "--format", "json", "RuntimeError: expected scalar type BFloat16 but found Float"]):
        proc = subprocess.Popen([sys.executable, "-m", "ampdoctor", *command], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # long before the interpreter has started and imported anything
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=120) == 141, (command, err)
        assert "Traceback" not in err and "BrokenPipe" not in err, err


SCALER_UNDER_BF16 = '''import torch


def step(model, x, opt):
    scaler = torch.amp.GradScaler("cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(x).float().mean()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
'''


def test_a_baseline_hides_recorded_findings_and_shows_new_ones(tmp_path, capsys):
    train, baseline = tmp_path / "train.py", tmp_path / "baseline.json"
    train.write_text(SCALER_UNDER_BF16)
    lint = ["lint", "--no-config", "--no-cache", "--format", "json", str(train)]
    assert main(lint) == 1  # AMP004 is an error
    capsys.readouterr()
    # a baseline that does not exist is a usage error: a misspelt path in CI must not pass every run
    assert main([*lint, "--baseline", str(baseline)]) == 2
    assert "no such file (record one with --write-baseline" in capsys.readouterr().err and not baseline.exists()
    assert main([*lint, "--write-baseline", str(baseline)]) == 0 and baseline.exists()
    capsys.readouterr()
    # lines added above move the finding; it is still the recorded one
    train.write_text("# a comment\n\n" + SCALER_UNDER_BF16)
    assert main([*lint, "--baseline", str(baseline)]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["findings"] == [] and "1 finding(s) already in the baseline" in captured.err
    # a second scaler is new
    train.write_text(SCALER_UNDER_BF16 + SCALER_UNDER_BF16.replace("def step", "def step2").split("\n", 2)[2])
    assert main([*lint, "--baseline", str(baseline)]) == 1
    new = json.loads(capsys.readouterr().out)["findings"]
    assert [(f["id"], f["location"]["line"]) for f in new] == [("AMP004", 13)]


def test_a_lint_that_finds_nothing_to_check_says_so(tmp_path, capsys):
    """An empty or unrelated folder (a wrong path, every file excluded) is not a clean bill: the summary says
    that nothing was checked, as ruff warns that it found no Python files."""
    (tmp_path / "notes.txt").write_text("hello\n")
    assert main(["lint", "--no-config", "--no-cache", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "nothing checked: no Python file or training config found" in out and "no findings" not in out
    (tmp_path / "train.py").write_text("x = 1\n")
    assert main(["lint", "--no-config", "--no-cache", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip().endswith("no findings in 1 checked")
