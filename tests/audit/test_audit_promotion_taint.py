"""The promotion a tensor descends from (AMP201's "the promoted tensor feeds an fp32 matmul") is worked out backwards
from the operands a rule asks about, not by a walk forward over every record after the first promotion."""

from __future__ import annotations

import torch
from torch import nn

from ampdoctor.audit import analysis, audit
from ampdoctor.audit.fields import FORWARD, IN_DT, IN_PROD, OUT_DT, PHASE
from ampdoctor.audit.observe import observe
from ampdoctor.audit.provenance import Trace
from ampdoctor.audit.recorder import Recorder
from ampdoctor.policy import Policy


class PromotedIntoFp32Matmul(nn.Module):
    """Under bf16 autocast an fp32 attribute promotes a bf16 activation; the promoted tensor goes through a few ops (one
    with a half operand) and feeds a matmul autocast is off for, which runs in fp32. A second promotion feeds nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(8, 8)
        self.down = nn.Linear(8, 8)
        self.scale = torch.full((8,), 0.5)
        self.shift = torch.full((8,), 0.25)

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = self.up(x)
            unused = (h * self.shift).sum()  # a promotion that feeds no fp32 matmul
            p = torch.relu(h * self.scale) + h  # promoted, then mixed with the half activation again
            with torch.autocast("cpu", enabled=False):
                out = p @ p.t()
        return out.sum() + unused


def _forward_taint(ctx) -> dict[int, int]:
    """The promotion each op descends from, walked forward over every record after the first promotion (the former
    computation, kept here as the definition)."""
    records, half = ctx.trace.records, ctx.HALF
    promoting = {op.record[0] for op in ctx.promotions}
    taint: dict[int, int] = {}
    for r in records[min(promoting, default=len(records)):]:
        s = r[0]
        if r[OUT_DT] is None and r[PHASE] != FORWARD:
            continue
        if s in promoting:
            taint[s] = s
            continue
        for d, p in zip(r[IN_DT], r[IN_PROD]):
            if p in taint and d not in half:
                taint[s] = taint[p]
                break
    return taint


def _context(monkeypatch, model) -> analysis.RuntimeContext:
    monkeypatch.setattr(Recorder, "release", lambda self: None)  # keep what the trace reads after the audit
    with audit("bf16-mixed") as a:
        model(torch.randn(4, 8)).backward()
    trace = Trace(a.recorder, model)
    return analysis.RuntimeContext(trace, Policy.parse("bf16-mixed"), observe(trace), "cpu", None, None, policy_given=True, ran_on="cpu")


def test_each_ops_promotion_is_the_one_the_forward_walk_finds(monkeypatch):
    ctx = _context(monkeypatch, PromotedIntoFp32Matmul())
    taint = _forward_taint(ctx)
    assert len(ctx.promotions) >= 2 and len(set(taint.values())) >= 2
    assert {s: ctx.promoted_from(s) for s in range(len(ctx.trace.records))} == {s: taint.get(s) for s in range(len(ctx.trace.records))}
    assert any(f.rule_id == "AMP201" and "feeds an fp32" in f.message for f in analysis.analyze(
        ctx.trace.rec, Policy.parse("bf16-mixed"), target_device="cpu", model=None, exc=None, checked=("x",)).report.findings)


def test_no_promotion_is_worked_out_where_no_fp32_matmul_reads_one(monkeypatch):
    class NoFp32Matmul(PromotedIntoFp32Matmul):
        def forward(self, x):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                h = self.up(x)
                return self.down(torch.relu(h * self.scale)).float().sum()

    ctx = _context(monkeypatch, NoFp32Matmul())
    assert ctx.promotions
    from ampdoctor.rules.amp201_implicit_dtype_promotion import promotions

    list(promotions(ctx))
    assert ctx._promoting[2] == {}  # asked about no op: nothing walked
