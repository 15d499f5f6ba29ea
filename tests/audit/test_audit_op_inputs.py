"""Where the recording finds an op's tensor inputs: at the places its schema declares tensors (`dispatch._plan`), with
every argument looked at where the schema cannot say (the records must be the same either way)."""

import contextlib

import pytest
import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode

from ampdoctor.audit import audit, dispatch
from ampdoctor.audit.fields import FUNC, IN_DT, IN_PROD, OUT_DT, PHASE

aten = torch.ops.aten


def test_the_plan_names_the_tensor_arguments_of_a_schema():
    assert dispatch._plan(aten.view.default) == (dispatch._FIRST, frozenset())
    assert dispatch._plan(aten.mm.default)[0] == ((0, False), (1, False))
    assert dispatch._plan(aten.cat.default)[0] == ((0, True),)
    assert dispatch._plan(aten.index.Tensor)[0] == ((0, False), (1, True))  # Tensor?[]: None where a dim is kept
    where, keywords = dispatch._plan(aten._to_copy.default)
    assert where is dispatch._FIRST and {"dtype", "device"} <= keywords
    # a keyword-only tensor (out=) is not among the names that hold none: passed, every argument is looked at
    assert "out" not in dispatch._plan(aten.add.out)[1] and "alpha" in dispatch._plan(aten.add.out)[1]
    # a generic type (List[t]) could hold anything: no plan
    assert dispatch._plan(aten.add.t) == (None, frozenset())


class _Step(nn.Module):
    """Ops whose tensor arguments sit in lists (cat, index with a kept dim), beside a number in a tensor's place
    (`x + 1` as the dispatcher passes it), keyword-only tensors (out=) and a keyword-only number (alpha)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.lin(x) + 1
        h = torch.cat([h, x.to(torch.bfloat16).float()], dim=-1)
        idx = torch.arange(4)
        h = h[:, None][idx, :, idx % 2]
        h = torch.add(h, h, alpha=0.5)
        buf = torch.empty_like(h)
        torch.mul(h.detach(), 2.0, out=buf)
        return torch.where(buf > 0, buf, h).sum() + torch.arange(3).shape[0]


def _records(fake: bool) -> list:
    with FakeTensorMode() if fake else contextlib.nullcontext():
        torch.manual_seed(0)
        model = _Step()
        with audit("fp32", model=model) as a:
            model(torch.randn(4, 8)).backward()
    ops = a.recorder.ops
    # leaves by the order of their first read (ids differ between runs)
    leaves: dict[int, int] = {}
    return [(str(ops[r[FUNC]]), r[IN_DT], tuple(p if p is None or p >= 0 else -leaves.setdefault(p, len(leaves) + 1) for p in r[IN_PROD]),
             r[OUT_DT], r[PHASE]) for r in a.recorder.records]


@pytest.mark.parametrize("fake", [False, True])
def test_an_ops_inputs_are_the_same_read_by_its_plan_or_from_every_argument(fake, monkeypatch):
    planned = _records(fake)
    monkeypatch.setattr(dispatch, "_plan", lambda func: (None, frozenset()))
    looked_at = _records(fake)
    assert planned == looked_at
    names = {name for name, *_ in planned}
    assert {"aten.cat.default", "aten.index.Tensor", "aten.add.Tensor", "aten.mul.out"} <= names
    # the number in a tensor's place is no input; the list's tensors and the keyword-only `out` are
    [add_one] = [r for r in planned if r[0] == "aten.add.Tensor" and len(r[1]) == 1][:1]
    assert add_one[1] == (torch.float32,)
    assert any(r[0] == "aten.cat.default" and len(r[1]) == 2 for r in planned)
    assert any(r[0] == "aten.mul.out" and len(r[1]) == 2 for r in planned)
