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


def _all_fields(fake: bool) -> list:
    """Every field of every record of a step with one-tensor ops (views, casts that a watch tags, the loss's
    ones_like), two-tensor ops, AccumulateGrad and a backward; leaf ids by the order of their first read."""
    with FakeTensorMode() if fake else contextlib.nullcontext():
        torch.manual_seed(0)
        model = _Step()
        x = torch.randn(4, 8)
        with audit("bf16-mixed", model=model) as a:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                out = model(x) + torch.mul(x, x).sum()  # a two-tensor op reading a leaf
            out.float().backward()
    ops = a.recorder.ops
    leaves: dict[int, int] = {}

    def prod(p):
        return p if p is None or p >= 0 else -leaves.setdefault(p, len(leaves) + 1)

    def extra(e):
        return tuple(prod(-v) if isinstance(v, int) and v > 1 << 20 else v for v in e) if isinstance(e, tuple) else e

    return [(str(ops[r[FUNC]]), r[IN_DT], tuple(prod(p) for p in r[IN_PROD]), r[OUT_DT], r[PHASE], *r[5:6], *r[7:11],
             extra(r[11])) for r in a.recorder.records]


@pytest.mark.parametrize("fake", [False, True])
def test_the_inline_paths_record_what_the_general_path_records(fake, monkeypatch):
    # `record` reads an op whose plan is `_FIRST` (one tensor, the first argument), or one tensor or none at each of
    # its places, without `_tensor_args`/`_inputs`, and finds its one-dtype tuples by dtype (`_one`); with no plan,
    # every op takes the general path, which looks at every argument.
    kinds = []
    kind = dispatch.RecordingMode._kind
    monkeypatch.setattr(dispatch.RecordingMode, "_kind", lambda self, fid, func: kinds.append(kind(self, fid, func)) or kinds[-1])
    inline = _all_fields(fake)
    assert any(k[2] is dispatch._FIRST for k in kinds) and any(k[4] for k in kinds)  # both inline paths taken
    monkeypatch.setattr(dispatch, "_plan", lambda func: (None, frozenset()))
    general = _all_fields(fake)
    assert inline == general
    names = [name for name, *_ in inline]
    assert {"aten._to_copy.default", "aten.view.default", "aten.ones_like.default", "aten.mm.default"} <= set(names)
    assert any(e for *_, e in inline)  # watched ops' tags (the casts, the loss) are among them


def test_the_one_dtype_tuples_are_the_shared_ones_for_every_dtype():
    mode = dispatch.RecordingMode(None)  # type: ignore[arg-type]
    kinds = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.bool, torch.uint8, torch.complex64]
    made = [mode._one(dt) for dt in kinds]
    assert made == [(dt,) for dt in kinds]
    assert all(mode._shared[(dt,)] is t and mode._ones[dt] is t for dt, t in zip(kinds, made))
    # a tuple the general path interned first is the one the one-tensor path finds
    other = dispatch.RecordingMode(None)  # type: ignore[arg-type]
    first = (torch.float16,)
    assert other._shared.setdefault(first, first) is first and other._one(torch.float16) is first


def test_each_audit_records_with_caches_of_its_own():
    lin = nn.Linear(4, 4)
    modes = []
    for dtype in (torch.float32, torch.float64):
        lin.to(dtype)
        with audit("fp32") as a:
            modes.append(a.recorder._mode)
            lin(torch.randn(2, 4, dtype=dtype)).sum()
        assert a.recorder._mode is None  # dropped with the audit: nothing it cached outlives it
        outs = {r[OUT_DT] for r in a.recorder.records}
        assert outs == {(dtype,)} and all(o is modes[-1]._ones[dtype] for o in (r[OUT_DT] for r in a.recorder.records))
    assert modes[0] is not modes[1]
    assert set(modes[0]._ones) == {torch.float32} and set(modes[1]._ones) == {torch.float64}
