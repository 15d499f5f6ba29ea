"""One behaviour per check, on small real modules."""

import linecache

import torch
import torch.nn as nn

from ampdoctor.audit import audit
from ampdoctor.core import Severity


def names(report):
    return sorted(f.name for f in report.findings)


class WithBuffer(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.register_buffer("scale", torch.ones(8))

    def forward(self, x):
        return self.proj(x) * self.scale.float()


def test_fp32_constant_dragging_a_half_model_to_fp32_is_an_implicit_promotion():
    model = WithBuffer().to(torch.bfloat16)
    with audit("bf16-true") as a:
        model(torch.randn(2, 8, dtype=torch.bfloat16)).float().sum().backward()
    [f] = [f for f in a.report.findings if f.name == "implicit-dtype-promotion"]
    assert (f.location.module, f.location.op, f.severity) == ("", "aten::mul", Severity.WARNING)
    assert "outside autocast" in f.message


def test_large_positions_in_bf16_are_reported():
    class Pos(nn.Module):
        def forward(self, n):
            return torch.arange(n, dtype=torch.bfloat16)

    with audit("bf16-mixed") as a:
        Pos()(1024)
    [f] = a.report.findings
    assert f.name == "low-precision-positions" and f.details == {"max": 1024.0, "dtype": "bf16"}


def test_loss_in_bf16_is_reported_and_fp32_loss_is_not():
    logits = torch.randn(4, 10, dtype=torch.bfloat16, requires_grad=True)
    target = torch.randint(0, 10, (4,))
    with audit("bf16-true") as a:
        nn.functional.cross_entropy(logits, target).backward()
    assert "loss-low-precision" in names(a.report)
    with audit("bf16-true") as b:
        nn.functional.cross_entropy(logits.float(), target).backward()
    assert "loss-low-precision" not in names(b.report)


def test_fp32_matmuls_under_a_bf16_policy_report_their_flop_share():
    model = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 32))
    with audit("bf16-mixed") as a:  # but no autocast: everything runs in fp32
        model(torch.randn(4, 32)).sum().backward()
    found = [f for f in a.report.findings if f.name == "fp32-matmul-in-bf16-policy"]
    # both layers run at one line (the Sequential's call): one finding with a count, each layer's share kept
    assert {m for f in found for m in f.details.get("modules", [f.location.module])} >= {"0", "2"}
    assert abs(sum(d["share"] for f in found for d in f.details.get("each", [f.details])) - 1.0) < 1e-3


def test_sensitive_ops_are_judged_by_the_target_devices_autocast():
    model = nn.Sequential(nn.Linear(16, 16), nn.Softmax(dim=-1))
    x = torch.randn(4, 16)
    for device, expected in (("cpu", []), ("cuda", ["1"])):
        with audit("bf16-mixed", target_device=device) as a:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                model(x)
        found = [f for f in a.report.findings if f.name == "low-precision-sensitive-op"]
        assert [f.location.module for f in found] == expected
        if found:
            assert found[0].location.op == "aten::_softmax" and found[0].details["device_type"] == "cuda"


def test_half_log_probs_under_autocast_are_the_losss_where_that_autocast_keeps_them_half():
    # CPU autocast keeps an explicit log_softmax in bf16 and casts for nll_loss: an fp32 loss of bf16 log-probabilities,
    # told by loss-low-precision (not again by low-precision-sensitive-op). Judged for CUDA, whose autocast would
    # upcast that log_softmax (only F.cross_entropy's stays half there), it is low-precision-sensitive-op's instead.
    model = nn.Linear(16, 10)
    x, target = torch.randn(4, 16), torch.randint(0, 10, (4,))

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = nn.functional.nll_loss(nn.functional.log_softmax(model(x), -1), target)
        loss.backward()
        return loss

    with audit("bf16-mixed", target_device="cpu") as a:
        assert step().dtype == torch.float32
    [f] = [f for f in a.report.findings if f.name == "loss-low-precision"]
    assert f.location.op == "aten::_log_softmax" and f.details == {"dtype": "bf16", "autocast": True}
    assert "under CPU autocast" in f.message and "logits.float()" in f.message
    assert "low-precision-sensitive-op" not in names(a.report)
    with audit("bf16-mixed", target_device="cuda") as b:
        step()
    assert "loss-low-precision" not in names(b.report)
    [g] = [g for g in b.report.findings if g.name == "low-precision-sensitive-op"]
    assert g.location.op == "aten::_log_softmax" and "CUDA autocast would run log_softmax in fp32" in g.message
    with audit("bf16-mixed", target_device="cpu") as c:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            nn.functional.nll_loss(nn.functional.log_softmax(model(x).float(), -1), target).backward()
    assert "loss-low-precision" not in names(c.report)


def test_cross_entropy_of_half_logits_judged_for_cuda_is_the_losss_although_cpu_autocast_upcast_it():
    # CPU autocast upcasts a whole F.cross_entropy (cast, log_softmax and nll_loss in one call); CUDA autocast keeps its
    # log_softmax in the logits' dtype (seen on an H100). Judged for CUDA the CPU trace says so; a cast the code
    # wrote, an explicit log_softmax given an fp32 dtype, or a judgement for the CPU are no finding.
    model = nn.Linear(16, 10)
    x, target = torch.randn(4, 16), torch.randint(0, 10, (4,))
    F = nn.functional

    def findings(device, loss_of):
        with audit("bf16-mixed", target_device=device) as a:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = loss_of(model(x))
            loss.backward()
        return [f for f in a.report.findings if f.name == "loss-low-precision"]

    [f] = findings("cuda", lambda logits: nn.CrossEntropyLoss()(logits, target) * 2)
    assert f.location.op == "aten::_log_softmax" and f.details["judged_for"] == "cuda" and f.details["dtype"] == "bf16"
    assert "CUDA autocast keeps its log_softmax in the logits' dtype" in f.message
    assert findings("cpu", lambda logits: F.cross_entropy(logits, target)) == []
    assert findings("cuda", lambda logits: F.cross_entropy(logits.float(), target)) == []
    assert findings("cuda", lambda logits: F.nll_loss(F.log_softmax(logits, -1, dtype=torch.float32), target)) == []


def test_an_elementwise_op_written_into_an_fp32_buffer_still_ran_in_half():
    # `torch.exp(x, out=fp32)` computes in bf16 and casts: an fp32 result says nothing there, unlike `sum(dtype=fp32)`
    x = torch.randn(4, 16, dtype=torch.bfloat16)
    with audit("bf16-mixed", target_device="cuda") as a:
        torch.exp(x, out=torch.empty(4, 16))
    assert [f.location.op for f in a.report.findings if f.name == "low-precision-sensitive-op"] == ["aten::exp"]


def test_a_sensitive_op_that_reads_half_and_computes_in_fp32_is_not_reported():
    # `sum(dtype=float32)` and CUDA's softmax given a dtype read the half input and accumulate and return fp32:
    # what autocast would do, so nothing runs in half; the plain sum beside it does
    x = torch.randn(4, 16, dtype=torch.bfloat16)
    with audit("bf16-mixed", target_device="cuda") as a:
        kept = x.sum(dim=-1, dtype=torch.float32)
        halved = x.sum(dim=-1)
    found = [f for f in a.report.findings if f.name == "low-precision-sensitive-op"]
    assert kept.dtype == torch.float32 and halved.dtype == torch.bfloat16
    assert [(f.location.op, f.details["calls"]) for f in found] == [("aten::sum", 1)]
    assert "halved = x.sum" in linecache.getline(found[0].location.file, found[0].location.line)


def test_bf16_and_fp16_in_one_op_are_mixed_half_dtypes():
    with audit("bf16-mixed") as a:
        torch.randn(3, dtype=torch.bfloat16) + torch.randn(3, dtype=torch.float16)
    assert "mixed-half-dtypes" in names(a.report)


def test_bf16_rope_table_attribute_is_found_by_the_module_scan():
    class Rotary(nn.Module):
        def __init__(self):
            super().__init__()
            t = torch.arange(64).float()[:, None] * torch.ones(8)
            self.cos_cached = t.cos().bfloat16()  # modded-nanogpt, incident 2

        def forward(self, x):
            return x * self.cos_cached[: x.shape[0]]

    with audit("bf16-mixed") as a:
        Rotary()(torch.randn(16, 8, dtype=torch.bfloat16))
    [f] = [f for f in a.report.findings if f.name == "rope-cache-low-precision"]
    assert f.details["tensor"] == "cos_cached" and f.location.module == ""


def test_pure_bf16_updates_that_round_away_and_bf16_state_are_reported():
    model = nn.Linear(64, 64).to(torch.bfloat16)
    with torch.no_grad():
        model.weight.fill_(4.0)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    with audit("bf16-true") as a:
        model(torch.randn(8, 64, dtype=torch.bfloat16)).float().pow(2).mean().backward()
        opt.step()
    [f] = [f for f in a.report.findings if f.name == "pure-bf16-optimizer"]
    assert f.details["unchanged_fraction"] > 0.5


def _run_script(tmp_path, monkeypatch, body):
    from ampdoctor.audit.runner import run

    (tmp_path / "step.py").write_text("import torch\n" + body)
    monkeypatch.chdir(tmp_path)
    return run("step.py", max_steps=None)


def test_a_failure_is_reported_with_exactly_one_error_its_root_cause(tmp_path, monkeypatch):
    result = _run_script(tmp_path, monkeypatch, (
        "w = torch.nn.Linear(4, 4).to(torch.bfloat16)\n"
        "y = w(torch.randn(2, 4, dtype=torch.bfloat16))\n"
        "torch.lerp(y, y.float(), 0.5)\n"))
    assert result.exit_code == 1
    errors = [f for f in result.report.findings if f.severity is Severity.ERROR]
    assert len(errors) == 1 and result.report.findings[0] is errors[0]
    root = errors[0]
    assert (root.name, root.location.op, root.location.line) == ("implicit-dtype-promotion", "aten::lerp", 4)
    assert root.details["root_cause"] is True and "a cast" in root.message
    # what explain says of the same exception is kept, below the root cause, as notes
    assert all(f.severity is not Severity.ERROR for f in result.report.findings[1:])


def test_an_op_that_failed_for_another_reason_is_not_blamed_on_promotion(tmp_path, monkeypatch):
    # bf16 and fp32 operands, but the op failed on shapes: no promotion chain, no dtype rule as root cause
    result = _run_script(tmp_path, monkeypatch, (
        "a = torch.ones(3, dtype=torch.bfloat16)\n"
        "torch.where(torch.ones(3, dtype=torch.bool), a, torch.ones(4))\n"))
    assert result.exit_code == 1
    assert [f.name for f in result.report.findings if f.severity is Severity.ERROR] == []
    assert "implicit-dtype-promotion" not in [f.name for f in result.report.findings]


def test_a_failure_before_any_recorded_op_is_placed_at_the_failing_call_not_in_the_audit(tmp_path, monkeypatch):
    # fftn checks its dtype before it dispatches (CPU has no fp16 FFT): no op of the step failed, no operands of two
    # dtypes met; the error text names the rule, and the finding stands where the script called the transform
    result = _run_script(tmp_path, monkeypatch, (
        "conv = torch.nn.Conv2d(4, 4, 3, padding=1).half()\n"
        "with torch.no_grad():\n"
        "    h = conv(torch.randn(1, 4, 8, 8, dtype=torch.float16))\n"
        "    torch.fft.fftn(h, dim=(-2, -1))\n"))
    assert result.exit_code == 1
    errors = [f for f in result.report.findings if f.severity is Severity.ERROR]
    assert [(f.rule_id, f.location.file, f.location.line) for f in errors] == [("AMP130", "step.py", 5)]
