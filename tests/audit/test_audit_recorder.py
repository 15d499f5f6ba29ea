"""What the recorder attributes each op to: module, phase and user line, without touching the graph."""

import sys

import torch
from torch import nn

from ampdoctor.audit import audit
from ampdoctor.audit.fields import BACKWARD, EXTRA, FORWARD, MOD, PHASE
from ampdoctor.audit.provenance import Trace


def test_backward_ops_are_attributed_to_the_module_that_ran_their_forward():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    x = torch.randn(3, 4)
    with audit("fp32", model=model) as a:
        model(x).sum().backward()
    trace = Trace(a.recorder, model)
    backward = [(trace.op(r[0]), trace.module(r[MOD])) for r in trace.records if r[PHASE] == BACKWARD]
    assert ("aten::threshold_backward", "1") in backward
    assert {m for op, m in backward if op == "aten::mm"} == {"0", "2"}
    # grad w.r.t. layer 2's input and weight; layer 0's input needs none
    assert sum(1 for op, m in backward if (op, m) == ("aten::mm", "2")) == 2
    assert sum(1 for op, m in backward if (op, m) == ("aten::mm", "0")) == 1
    # AccumulateGrad into each of the 4 parameters, outside any module
    accumulate = [r for r in trace.records if r[PHASE] == BACKWARD and r[EXTRA] and r[EXTRA][0] == "accumulate"]
    assert sorted(r[EXTRA][1] for r in accumulate) == sorted(id(p) for p in model.parameters())
    assert all(r[MOD] == -1 for r in accumulate)


def test_the_audit_writes_nothing_on_the_autograd_graph():
    lin = nn.Linear(4, 4)
    with audit("fp32"):
        h = lin(torch.randn(2, 4))
        y = (h * 2).sum()
    y.backward()
    assert dict(h.grad_fn.metadata) == {} and dict(y.grad_fn.metadata) == {}


def test_ops_inside_torch_modules_are_located_at_the_user_line_that_called_the_model():
    model = nn.Sequential(nn.Sequential(nn.Linear(4, 4)), nn.ReLU())
    x = torch.randn(2, 4)
    with audit("fp32", model=model) as a:
        call_line = sys._getframe().f_lineno + 1
        out = model(x)
        out.sum()
    sum_line = call_line + 1
    trace = Trace(a.recorder, model)
    forward = {trace.op(r[0]): r[0] for r in trace.records if r[PHASE] == FORWARD}
    addmm = trace.location(forward["aten::addmm"])
    assert (addmm.module, addmm.line) == ("0.0", call_line) and addmm.file.endswith("test_audit_recorder.py")
    assert trace.location(forward["aten::relu"]).line == call_line
    assert trace.location(forward["aten::sum"]).line == sum_line
    # the model's first caller, as the module table's `caller` records it
    assert a.recorder.modules[0].caller[1] == call_line
