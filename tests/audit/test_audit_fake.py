"""The audit under FakeTensorMode records inside the fake mode's own dispatch (no second dispatch mode on the stack),
and what it records there is what a recording mode above the fake mode records: the same ops, dtypes, phases,
modules and lines, and the same findings; nothing of it is left on the fake mode afterwards."""

from __future__ import annotations

import contextlib

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode, _get_current_dispatch_mode_stack

from ampdoctor.audit.dispatch import line_of
from ampdoctor.audit.evidence import Tag
from ampdoctor.audit.fields import EXTRA, IN_PROD
from ampdoctor.audit.session import audit_step


class Passthrough(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


class MixedHalves(torch.nn.Module):
    """A bf16 layer scaled by an fp16 parameter: the product promotes to fp32 (AMP121, a warning at the `*` line)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8, dtype=torch.bfloat16)
        self.scale = torch.nn.Parameter(torch.ones(8, dtype=torch.float16))
        self.stacks: list = []

    def forward(self, x):
        self.stacks.append(list(_get_current_dispatch_mode_stack()))
        return (self.lin(x) * self.scale).sum()


def _audit(user_mode: bool):
    with FakeTensorMode() as fake:
        model = MixedHalves()
        x = torch.randn(4, 8, dtype=torch.bfloat16)
        # with a mode under the audit's, the audit records as a mode of its own, above it
        with Passthrough() if user_mode else contextlib.nullcontext():
            a = audit_step(model, x, loss_fn=lambda out, batch: out, policy="bf16-true")
    return a, fake, model.stacks[0]


# The fake mode's methods the recording wraps while it records inside the mode (dispatch._fake_target).
_PATCHED = {"_cached_dispatch_impl", "_dispatch_impl"}


def _records(a) -> list:
    r = a.recorder
    out = []
    for seq, fid, in_dt, _, out_dt, mod, phase, code, lasti, inner, autocast, _ in r.records:
        out.append((seq, str(r.ops[fid]), in_dt, out_dt, mod, phase, code and (code.co_filename, line_of(code, lasti)), inner, autocast))
    return out


def test_fake_audit_records_inside_the_fake_mode_as_a_mode_above_it_would():
    fused, fake, stack = _audit(user_mode=False)
    assert stack == [fake]  # no recording mode of its own during the step
    assert not _PATCHED & vars(fake).keys()  # and nothing left on the fake mode
    moded, _, stack_moded = _audit(user_mode=True)
    assert len(stack_moded) == 3 and isinstance(stack_moded[1], Passthrough)  # fake, the user's mode, the audit's
    assert _records(fused) == _records(moded) and len(_records(fused)) > 10
    assert {r[5] for r in _records(fused)} >= {"forward", "backward"}
    found = [(f.rule_id, f.severity.name, f.location.line) for f in fused.report.findings]
    assert found == [(f.rule_id, f.severity.name, f.location.line) for f in moded.report.findings]
    assert ("AMP121", "WARNING", MixedHalves.forward.__code__.co_firstlineno + 2) in found  # the product ran: promoted, no failure


class LiftsAConstant(torch.nn.Module):
    """A model that makes a real constant under the fake mode (as attention masks do with `finfo.min`): the fake
    mode lifts it, and the audit may measure the real tensor it came from."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8, dtype=torch.bfloat16)

    def forward(self, x):
        fill = torch.tensor(torch.finfo(x.dtype).min, dtype=x.dtype)
        return torch.maximum(self.lin(x), fill).sum()


def test_a_fake_audit_that_measured_a_lifted_constant_builds_its_report():
    with FakeTensorMode():
        a = audit_step(LiftsAConstant(), torch.randn(4, 8, dtype=torch.bfloat16), loss_fn=lambda out, batch: out, policy="bf16-true")
    assert a.report.errors == ()


def test_a_sampled_fake_audit_keeps_sampling_under_a_mode_the_script_entered_after_it():
    # between samples the recording comes off the fake mode only where nothing of the script's sits above it (as the
    # recording mode does): taken off under the script's mode, it could not come back there, and every later sample
    # was skipped
    import ampdoctor

    def run(mode_under: bool):
        with FakeTensorMode() as fake:
            torch.manual_seed(0)
            model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
            opt = torch.optim.SGD(model.parameters(), lr=0.01)
            with Passthrough() if mode_under else contextlib.nullcontext():
                with ampdoctor.audit(every=2) as a:
                    with Passthrough():
                        for _ in range(6):
                            model(torch.randn(2, 8)).sum().backward()
                            opt.step()
                            opt.zero_grad()
        return a.recorder.recorded_steps, a.recorder.samples_skipped, len(a.recorder.records), bool(_PATCHED & vars(fake).keys())

    assert run(mode_under=False) == run(mode_under=True)
    assert run(mode_under=False)[:2] == ([1, 3, 5], 0) and not run(mode_under=False)[3]


class CastsItsOutput(torch.nn.Module):
    """A linear layer under autocast whose bf16 result the model's own code casts to fp32: one cast autocast makes
    (the fp32 weight, inside the linear call) and one the user makes (`.float()`)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.lin(x).float().sum()


def _cast_columns(a) -> dict:
    table = next(t for t in a.report.tables if t.title.startswith("Per-module dtypes"))
    return {row[0]: row[-2:] for row in table.rows}


def _audit_casts(fake: bool):
    with FakeTensorMode() if fake else contextlib.nullcontext():
        torch.manual_seed(0)
        return audit_step(CastsItsOutput(), torch.randn(4, 8), loss_fn=lambda out, batch: out, policy="bf16-mixed")


def test_fake_audit_records_no_metadata_queries_and_tells_casts_apart_as_on_real_tensors():
    # Autograd asks a fake tensor's device through dispatch (a real tensor answers in C++): those queries compute
    # nothing, and recorded they stood between the user's `.float()` and nothing, so the cast read as autocast's.
    fake, real = _audit_casts(fake=True), _audit_casts(fake=False)
    ops = {str(fake.recorder.ops[r[1]]) for r in fake.recorder.records}
    assert not ops & {"prim.device.default", "aten.size.default", "aten.stride.default", "aten.storage_offset.default"}
    assert "aten.addmm.default" in ops or "aten.mm.default" in ops
    assert _cast_columns(fake) == _cast_columns(real)
    assert _cast_columns(fake)["<root>"] == ("0", "1")  # the user's `.float()`


def test_value_watch_is_not_asked_about_results_a_fake_only_mode_makes(monkeypatch):
    # every result of a FakeTensorMode that takes fake inputs only is fake, and the watch measures no fake tensor;
    # a fake mode that also takes real inputs may hand a real tensor to an in-place op, so it still asks
    from ampdoctor.audit import values

    asked = []
    original = values.ValueWatch.output
    monkeypatch.setattr(values.ValueWatch, "output", lambda self, *a, **k: (asked.append(a[0]), original(self, *a, **k))[1])
    for allow_real, expect_asked in ((False, False), (True, True)):
        asked.clear()
        with FakeTensorMode(allow_non_fake_inputs=allow_real):
            a = audit_step(MixedHalves(), torch.randn(4, 8, dtype=torch.bfloat16), loss_fn=lambda out, batch: out, policy="bf16-true")
        assert bool(asked) == expect_asked
        assert [f.rule_id for f in a.report.findings] == ["AMP121"]


class Square(torch.autograd.Function):
    """A Function whose backward is Python: its ops keep their own line, unlike the ops the autograd engine runs."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x * grad


class Squares(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        return Square.apply(self.lin(x)).float().sum()


def _full_records(fake: bool, entry_depth: int | None) -> list:
    """Every field of every record of an autocast step of `Squares`, with the ids of leaves and of the parameters
    AccumulateGrad nodes accumulate into as "leaf"; with `entry_depth`, the recording's jump past the mode's entry
    pinned to that depth."""
    from ampdoctor.audit import dispatch

    def fields(r: tuple) -> tuple:
        extra = (Tag.ACCUMULATE, "leaf") if r[EXTRA] and r[EXTRA][0] == Tag.ACCUMULATE else r[EXTRA]
        return (*r[:IN_PROD], tuple("leaf" if p is not None and p < 0 else p for p in r[IN_PROD]), *r[IN_PROD + 1:EXTRA], extra)

    find = dispatch.RecordingMode._find_entry
    if entry_depth is not None:
        dispatch.RecordingMode._find_entry = lambda self: entry_depth
    try:
        with FakeTensorMode() if fake else contextlib.nullcontext():
            torch.manual_seed(0)
            a = audit_step(Squares(), torch.randn(4, 8), loss_fn=lambda out, batch: out, policy="bf16-mixed")
    finally:
        dispatch.RecordingMode._find_entry = find
    return [fields(r) for r in a.recorder.records]


def test_the_frame_walk_jumps_exactly_past_the_modes_entry():
    # Each op's walk starts at the caller of the mode's `__torch_dispatch__` (found at the first op, reached in one
    # jump) instead of passing the mode's frames one by one. Pinned to depth 1 (record's caller: every frame walked)
    # or past the top of the stack (an autograd device thread, where no Python frame lies above the entry), the
    # records are the same: lines, inner call sites, phases, modules, the engine's ops told from a Function's backward.
    for fake in (True, False):
        records = _full_records(fake, None)
        assert records == _full_records(fake, 1)
        assert records == _full_records(fake, 10**6)
        lines = {(r[6], r[7] is not None) for r in records}
        assert {("forward", True), ("backward", True), ("backward", False)} <= lines


class Experts(torch.nn.Module):
    """MoE experts as one grouped matmul of fp32 weights: the real CPU kernel takes fp32, torch's meta function of the
    op (what fake tensors run) takes bf16 only."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(2, 16, 16) * 0.02)

    def forward(self, x):
        offs = torch.tensor([8, 16], dtype=torch.int32)
        return torch.nn.functional.grouped_mm(x.to(self.w.dtype), self.w, offs=offs).float().pow(2).mean()


def test_a_failure_only_fake_tensors_raise_is_told_as_possibly_the_fake_runs():
    from ampdoctor.audit.analysis import META_NOTE

    real = audit_step(Experts(), {"x": torch.randn(16, 16)}, policy="bf16-mixed", reraise=False)
    assert real.exception is None and META_NOTE not in real.report.info.notes
    with FakeTensorMode():
        fake = audit_step(Experts(), {"x": torch.randn(16, 16)}, policy="bf16-mixed", reraise=False)
    assert fake.exception is not None and "BF16" in str(fake.exception)
    assert META_NOTE in fake.report.info.notes
    # a failure in a meta function that the run explains by a root cause (an fp32 activation meeting a bf16 table in
    # a bmm) is the model's: no such note
    with FakeTensorMode():
        mixed = audit_step(BmmOfTwoDtypes(), {"x": torch.randn(2, 4, 8)}, policy="fp32", reraise=False)
    assert mixed.exception is not None and any(f.severity.value == "error" for f in mixed.report.findings)
    assert META_NOTE not in mixed.report.info.notes


def test_the_fake_audit_of_a_config_runs_a_grouped_matmul_as_the_kernels_do():
    # The audit's own fake mode gives fp32 grouped matmuls a result where torch's meta function refuses them (both
    # kernels run them): the fake step goes on, records the op with the operands the model gave it, and finds what
    # the real step finds. Operands of two dtypes still fail, as in the kernels.
    from ampdoctor.audit.fakes import FaithfulFakeTensorMode

    real = audit_step(Experts(), {"x": torch.randn(16, 16)}, policy="bf16-mixed", reraise=False)
    from torch._subclasses.fake_impls import op_implementations_dict

    stacks: list = []
    with FaithfulFakeTensorMode() as mode:
        experts = Experts()
        experts.register_forward_pre_hook(lambda m, args: stacks.append(list(_get_current_dispatch_mode_stack())))
        fake = audit_step(experts, {"x": torch.randn(16, 16)}, policy="bf16-mixed", reraise=False)
    assert fake.exception is None and stacks == [[mode]]  # recorded inside the fake mode, as under torch's own
    assert torch.ops.aten._grouped_mm.default not in op_implementations_dict  # its rule is gone with it
    grouped = [r for r in _records(fake) if "grouped_mm" in r[1]]
    assert grouped and all({d for d in r[2] if d.is_floating_point} == {torch.float32} and r[3] == (torch.float32,) for r in grouped)
    assert {r[5] for r in grouped} == {"forward", "backward"}
    assert not any("_to_copy" in r[1] and torch.bfloat16 in (r[3] or ()) for r in _records(fake))  # its own casts unseen
    found = sorted((f.rule_id, f.severity.name, f.location.line) for f in fake.report.findings)
    assert found == sorted((f.rule_id, f.severity.name, f.location.line) for f in real.report.findings)
    assert any(rule == "AMP203" for rule, _, _ in found)
    with FaithfulFakeTensorMode():
        a, b = torch.randn(16, 16), torch.randn(2, 16, 16, dtype=torch.bfloat16)
        with pytest.raises(RuntimeError):
            torch.nn.functional.grouped_mm(a, b, offs=torch.tensor([8, 16], dtype=torch.int32))


class BmmOfTwoDtypes(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.table = torch.nn.Parameter(torch.ones(2, 8, 8, dtype=torch.bfloat16))

    def forward(self, x):
        return torch.bmm(self.lin(x), self.table).float().sum()


def test_the_fake_audit_files_what_it_made_as_old_for_the_collector():
    """The collector, paused for a fake audit, comes back without first walking every object the audit made: they
    are in the oldest generation (a fresh object made in the audit is found there, not among the young ones)."""
    import gc

    from ampdoctor.audit.hf import _collector_paused

    assert gc.isenabled()
    with _collector_paused():
        made = [object()]  # a list is tracked by the collector
    assert any(o is made for o in gc.get_objects(generation=2))
    assert not any(o is made for o in gc.get_objects(generation=0))


def test_the_fake_audit_leaves_objects_a_program_froze_frozen():
    import gc

    from ampdoctor.audit.hf import _collector_paused

    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with _collector_paused():
            [object()]
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()


def test_a_fake_audit_whose_step_raises_leaves_the_process_as_it_found_it(monkeypatch):
    """Everything the fake audit changes for its recording comes back when the step raises: the collector's state (on,
    or off where the program turned it off), the dispatch and function mode stacks, the global module hooks, the fake
    modes' table of op implementations."""
    import gc
    import os

    import torch.nn.modules.module as module_mod
    from torch._subclasses import fake_impls
    from torch.overrides import _get_current_function_mode_stack

    from ampdoctor.audit import session
    from ampdoctor.audit.hf import audit_hf_config

    def raising_step(model, batch, *args):
        model(**batch)
        raise RuntimeError("the step failed")

    monkeypatch.setattr(session, "_step", raising_step)
    tiny = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "audit_tiny_config.json")
    hooks = (dict(module_mod._global_forward_pre_hooks), dict(module_mod._global_forward_hooks))
    table = dict(fake_impls.op_implementations_dict)
    for collecting in (True, False):
        if not collecting:
            gc.disable()
        try:
            with pytest.raises(RuntimeError, match="the step failed"):
                audit_hf_config(tiny, fake=True, seq_len=16)
            assert gc.isenabled() is collecting
        finally:
            gc.enable()
        assert _get_current_dispatch_mode_stack() == [] and _get_current_function_mode_stack() == []
        assert (dict(module_mod._global_forward_pre_hooks), dict(module_mod._global_forward_hooks)) == hooks
        assert dict(fake_impls.op_implementations_dict) == table
