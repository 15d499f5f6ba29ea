"""`ampdoctor.compare`: the metrics against errors computed by hand in float64, the culprit module ranked first by
its local error, update underflow counted element by element, and the `compare` command."""

import json
import math

import pytest
import torch
from torch import nn

from ampdoctor import compare
from ampdoctor.cli import main
from ampdoctor.numerics import error_stats
from ampdoctor.numerics.divergence import update_underflow


def test_error_stats_are_the_float64_formulas():
    ref = torch.tensor([1.0, 2.0, 2.0], dtype=torch.float64)
    approx = torch.tensor([1.0, 2.5, 2.0], dtype=torch.float32)
    stats = error_stats(approx, ref)
    assert stats.rel_l2 == pytest.approx(0.5 / 3.0)
    assert stats.max_abs == pytest.approx(0.5)
    assert stats.sqnr_db == pytest.approx(20 * math.log10(3.0 / 0.5))
    assert error_stats(ref, ref).sqnr_db == math.inf and error_stats(ref, ref).rel_l2 == 0.0


def test_a_linear_layer_under_bf16_autocast_has_the_error_of_its_bf16_matmul():
    torch.manual_seed(0)
    layer = nn.Linear(16, 8)
    x = torch.randn(4, 16)
    res = compare(layer, (x,), policy="bf16-mixed")
    w, b = layer.weight.detach(), layer.bias.detach()
    exact = x.double() @ w.double().T + b.double()
    bf16 = torch.nn.functional.linear(x.bfloat16(), w.bfloat16(), b.bfloat16()).double()
    expected = float((bf16 - exact).norm() / exact.norm())
    root = res.module("")
    assert root.forward_error == pytest.approx(expected, rel=1e-6)
    assert root.local_error == pytest.approx(expected, rel=1e-6)  # the root's own inputs are the model's inputs
    assert root.forward.max_abs == pytest.approx(float((bf16 - exact).abs().max()), rel=1e-6)
    # loss = mean(out^2): d loss / d out = 2 out / N, in float64 and from the bf16 output (upcast to fp32 for the loss)
    grad_exact, grad_policy = 2 * exact / exact.numel(), 2 * bf16.float().double() / exact.numel()
    assert root.grad_error == pytest.approx(float((grad_policy - grad_exact).norm() / grad_exact.norm()), rel=1e-4)
    assert root.param_grad_error is not None and 1e-4 < root.param_grad_error < 0.05


class MatmulNorm(nn.Module):
    """A normalisation whose statistics go through matmuls, which autocast runs in bf16."""

    def __init__(self, width):
        super().__init__()
        self.register_buffer("average", torch.full((width, width), 1.0 / width))

    def forward(self, x):
        centred = x - x @ self.average
        return centred / ((centred * centred) @ self.average + 1e-5).sqrt()


class Net(nn.Module):
    def __init__(self, width=32):
        super().__init__()
        self.inp, self.norm, self.mid, self.act, self.out = nn.Linear(width, width), MatmulNorm(width), nn.Linear(width, width), nn.GELU(), nn.Linear(width, 8)

    def forward(self, x):
        return self.out(self.act(self.mid(self.norm(self.inp(x) + 100.0))))


def make_net():
    torch.manual_seed(0)
    return Net(), (torch.randn(4, 32),)


def test_the_low_precision_module_ranks_first_by_local_error_not_what_follows_it():
    res = compare(*make_net(), policy="bf16-mixed")
    ranked = [m.name for m in res.hotspots()]
    assert ranked[0] == "norm"
    norm, mid = res.module("norm"), res.module("mid")
    assert norm.local_error > 0.05
    # downstream modules inherit the error in their forward error but add little themselves
    assert mid.forward_error > 0.05 and mid.local_error < 0.01
    assert [(f.rule_id, f.location.module) for f in res.report.findings] == [("AMP207", "norm")]


def test_update_underflow_counts_the_elements_whose_update_rounds_away():
    p = nn.Parameter(torch.tensor([1.0, 1.0, 1e-3, 1e-3]))
    model = nn.Module()
    model.p = p
    p.grad = torch.ones(4)
    # one AdamW step of lr=1e-4 moves each weight by ~1e-4: below half a bf16 ulp at 1.0 (2^-8), above it at 1e-3
    (row,) = update_underflow(model, torch.bfloat16, lr=1e-4)
    assert (row.parameter, row.dtype, row.lost_fraction, row.considered) == ("p", "bf16", 0.5, 4)
    (row32,) = update_underflow(model, torch.float32, lr=1e-4)
    assert row32.lost_fraction == 0.0


def test_compare_command_json_and_bad_input(tmp_path, monkeypatch, capsys):
    (tmp_path / "numnet.py").write_text(
        "import torch\nfrom torch import nn\n\n\ndef factory():\n    torch.manual_seed(0)\n"
        "    model = nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8), nn.Linear(8, 2))\n    return model, (torch.randn(2, 8),)\n")
    monkeypatch.chdir(tmp_path)
    assert main(["compare", "numnet:factory", "--policy", "bf16-true", "--format", "json"]) == 0  # warnings only
    data = json.loads(capsys.readouterr().out)
    lost = {f["details"]["parameter"] for f in data["findings"] if f["id"] == "AMP208"}
    # the LayerNorm weights sit at 1.0 and lose their updates; its biases sit at 0.0, where every update lands
    assert "1.weight" in lost and "1.bias" not in lost
    assert data["tables"][0]["columns"][:5] == ["module", "type", "leaf", "local error", "forward error"]
    assert data["charts"][0]["kind"] == "bar"
    for argv, message in ((["compare", "numnet:nope"], "numnet:nope: AttributeError"),
                          (["compare", "--hf-config", str(tmp_path / "missing.json")], "no such file"),
                          (["compare"], "compare needs a model")):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("ampdoctor: error:") and message in err[0]


def test_compare_of_a_model_whose_step_fails_writes_a_report_and_exits_1(tmp_path, monkeypatch, capsys):
    (tmp_path / "brokennet.py").write_text(
        "import torch\nfrom torch import nn\n\n\nclass Broken(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.proj = nn.Linear(8, 8)\n\n    def forward(self, x):\n        return self.proj(x)[:, 99]\n\n\n"
        "def factory():\n    return Broken(), (torch.randn(2, 8),)\n")
    monkeypatch.chdir(tmp_path)
    assert main(["compare", "brokennet:factory", "--format", "json"]) == 1
    out = capsys.readouterr()
    data = json.loads(out.out)
    assert data["info"]["script_failed"] is True and data["info"]["exception"].startswith("IndexError: index 99 is out of bounds")
    assert "Traceback" not in out.err
