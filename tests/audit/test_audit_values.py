"""The value watch: per-op value statistics, the first non-finite value traced to its module and line in every
phase, and the thresholds checked against torch's own casts."""

from __future__ import annotations

import json
import math

import pytest
import torch
from torch import nn

from ampdoctor.audit import audit
from ampdoctor.audit.runner import run
from ampdoctor.audit.values import ValueWatch
from ampdoctor.report import render_json

OVERFLOWING_SCRIPT = '''\
import torch
from torch import nn


class FeedForward(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.wi = nn.Linear(16, 64)
        self.wo = nn.Linear(64, 16)

    def forward(self, h):
        h = torch.relu(self.wi(h))
        return self.wo(h)  # values beyond 65504 here


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ff = FeedForward()
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.ff(x))


torch.manual_seed(0)
model = Model().half()
with torch.no_grad():
    model.ff.wo.weight.mul_(3e4)
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
x, y = torch.randn(8, 16).half() * 4, torch.randn(8, 4)
loss = torch.nn.functional.mse_loss(model(x).float(), y)
loss.backward()
optimizer.step()
'''


def _line(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if needle in line)


@pytest.fixture(scope="module")
def overflowing_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("overflow")
    (folder / "train_fp16.py").write_text(OVERFLOWING_SCRIPT)
    import os

    here = os.getcwd()
    os.chdir(folder)
    try:
        return run("train_fp16.py", max_steps=None)
    finally:
        os.chdir(here)


def test_the_first_inf_of_an_fp16_script_is_traced_to_its_module_and_line(overflowing_run):
    [first] = [f for f in overflowing_run.report.findings if f.rule_id == "AMP214"]
    loc = first.location
    assert (loc.file, loc.line, loc.module, loc.op, loc.phase) == (
        "train_fp16.py", _line(OVERFLOWING_SCRIPT, "return self.wo(h)"), "ff.wo", "aten::addmm", "forward")
    assert first.details["kind"] == "inf" and first.message.endswith("the loss became NaN")  # inf - inf in the head
    # the operands, each where it was made: the ReLU output of the line above and the weight scaled by 3e4
    assert {r.line for r in first.related if r.file} >= {_line(OVERFLOWING_SCRIPT, "h = torch.relu(self.wi(h))")}


def test_the_overflow_is_reported_per_module_with_its_share_of_values(overflowing_run):
    hits = {(f.location.module, f.location.phase): f for f in overflowing_run.report.findings if f.rule_id == "AMP212"}
    forward = hits[("ff.wo", "forward")]
    assert forward.location.line == _line(OVERFLOWING_SCRIPT, "return self.wo(h)")
    assert forward.details["dtype"] == "fp16" and 0 < forward.details["overflow_fraction"] < 1
    assert forward.details["input_amax"] > 1000  # the weight the script scaled up


def test_the_value_table_shows_amax_and_overflow_per_module_and_phase(overflowing_run):
    table = next(t for t in overflowing_run.report.tables if t.title.startswith("Per-module value ranges"))
    assert table.columns[:7] == ("module", "phase", "ops", "amax", "non-finite ops", "overflow fp16", "flush to zero fp16")
    rows = {(r[0], r[1]): r for r in table.rows}
    assert rows[("ff.wo", "forward")][3] == "inf" and rows[("ff.wo", "forward")][4] == "1"
    wi = rows[("ff.wi", "forward")]
    assert wi[4] == "0" and wi[5] == "0" and 0 < float(wi[3]) < 65504
    # the table is part of the JSON report too
    data = json.loads(render_json(overflowing_run.report))
    assert [t["columns"][3] for t in data["tables"]] == ["inputs", "amax"]
    assert ["ff.wo", "forward", "1", "inf"] in [row[:4] for row in data["tables"][1]["rows"]]


def test_a_backward_overflow_is_placed_at_the_forward_line_that_built_its_node():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).half()
    with torch.no_grad():
        model[2].weight.mul_(3000)
    x = torch.randn(4, 8).half() * 10
    with audit(model=model) as a:
        import sys

        call_line = sys._getframe().f_lineno + 1
        out = model(x)
        out.float().pow(2).mean().backward()
    [first] = [f for f in a.report.findings if f.rule_id == "AMP214"]
    assert (first.location.phase, first.location.module, first.location.op, first.location.line) == ("backward", "2", "aten::mm", call_line)
    assert first.location.label == "backward of aten::addmm called here"


def test_nan_in_the_input_data_is_named_where_it_was_first_read():
    model = nn.Linear(4, 2)
    x = torch.randn(3, 4)
    x[1, 2] = float("nan")
    with audit(model=model) as a:
        model(x).sum().backward()
    [first] = [f for f in a.report.findings if f.rule_id == "AMP214"]
    assert first.details["from_input"] is True and first.location.op == "aten::addmm" and first.location.module == ""
    assert "already held NaN" in first.message


def test_a_minus_inf_mask_is_no_origin_but_a_fully_masked_row_is():
    scores = torch.randn(2, 4, 4, requires_grad=True)
    mask = torch.tril(torch.ones(4, 4, dtype=torch.bool))
    with audit("fp32") as a:
        torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1).sum().backward()
    assert [f for f in a.report.findings if f.rule_id in ("AMP212", "AMP214")] == []
    mask[0] = False  # row 0 sees nothing: softmax of all -inf is NaN
    with audit("fp32") as a:
        import sys

        line = sys._getframe().f_lineno + 1
        torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1).sum().backward()
    [first] = [f for f in a.report.findings if f.rule_id == "AMP214"]
    assert (first.location.op, first.location.line, first.details["kind"]) == ("aten::_softmax", line, "nan")


def test_gradient_overflow_under_a_grad_scaler_is_the_scalers_business():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 16), nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**40)  # far too large: the first backward overflows
    with audit() as a:
        with torch.autocast("cpu", dtype=torch.float16):
            loss = model(torch.randn(8, 16)).float().pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    assert scaler.get_scale() < 2.0**40  # the step was skipped: there was an overflow to ignore
    assert [f.rule_id for f in a.report.findings if f.rule_id in ("AMP212", "AMP214")] == []


def test_the_watch_can_be_switched_off():
    model = nn.Linear(4, 2).half()
    with torch.no_grad():
        model.weight.fill_(60000)
    with audit(model=model, watch_values=False) as a:
        model(torch.ones(1, 4).half())
    assert a.recorder.values is None
    assert [t.title for t in a.report.tables] == ["Per-module dtypes (runtime audit)"]


# --- thresholds, against torch's own casts -------------------------------------------------------------------------

def _edge_values() -> torch.Tensor:
    """Magnitudes around every threshold, both signs, plus zeros, inf and NaN, in float64 (exact for all bounds)."""
    edges = [0.0, 2.0**-134, 2.0**-133.5, 2.0**-133, 2.0**-25, 2.0**-24.5, 2.0**-24, 2.0**-14, 6.0e-5, 6.2e-5, 65504.0,
             65519.0, 65520.0, 2.0**128 - 2.0**119, 3.3961e38, 3.39e38, math.inf]
    torch.manual_seed(0)
    spread = torch.exp2(torch.empty(1500, dtype=torch.float64).uniform_(-140, 130))  # 2 x 1517 + 1 values: under SAMPLE, all counted
    x = torch.cat([torch.tensor(edges, dtype=torch.float64), spread])
    x = torch.cat([x, -x, torch.tensor([math.nan], dtype=torch.float64)])
    return x.to(torch.float32)


@pytest.mark.parametrize("dtype, name", [(torch.float16, "fp16"), (torch.bfloat16, "bf16")])
def test_flush_and_overflow_counts_agree_with_the_cast(dtype, name):
    x = _edge_values()
    watch = ValueWatch()
    watch._measure(0, [x], False)
    watch.flush()
    stats = watch.stats[0]
    assert stats.sampled == x.numel() and stats.has_nan
    cast = x.to(dtype)
    finite = ~x.isnan()
    assert stats.count("flush", name) == int(((cast == 0) & (x != 0) & finite).sum())
    assert stats.count("overflow", name) == int((cast.isinf() & finite).sum())
    assert stats.count("zero", name) == int((x == 0).sum())
    if name == "fp16":
        subnormal = (cast != 0) & (cast.abs() < 2.0**-14) & finite
        below = (x.abs() < 2.0**-14) & (cast.abs() != 2.0**-14) & (cast != 0)
        assert stats.count("subnormal", name) == int(subnormal.sum()) == int(below.sum())


def test_large_tensors_are_sampled_but_a_single_inf_is_never_missed():
    x = torch.randn(1 << 20)
    x[123457] = math.inf
    watch = ValueWatch()
    watch._measure(0, [x], False)
    watch.flush()
    stats = watch.stats[0]
    assert stats.amax == math.inf and stats.sampled <= 1 << 12


class _RelativeBuckets(nn.Module):
    """T5-style relative-position bucketing: log of a distance that can be 0 gives -inf, which `where` then drops."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x, rel):
        large = torch.log(rel.float() / 4) * 2 + 4  # -inf where rel == 0
        buckets = torch.where(rel < 4, rel.float(), large)
        return self.proj(x) + buckets.mean()


def test_a_non_finite_value_every_reader_discards_is_a_note_and_one_that_reaches_the_loss_an_error():
    model = _RelativeBuckets()
    x, rel = torch.randn(4, 8), torch.arange(8).repeat(4, 1)
    with audit(model=model) as a:
        model(x, rel).sum().backward()
    [first] = [f for f in a.report.findings if f.rule_id == "AMP214"]
    assert first.severity.value == "info" and first.details["discarded"] is True
    assert "discarded" in first.message and "aten::" in first.message
    # the same -inf, read by an op that keeps it, reaches the loss: an error
    with audit(model=model) as a:
        (model(x, rel) + torch.log(rel.float()).mean()).sum().backward()
    [first] = [f for f in a.report.findings if f.rule_id == "AMP214"]
    assert first.severity.value == "error" and first.details["discarded"] is False
