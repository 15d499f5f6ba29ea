"""Sampled audits (`audit(every=N)`, `run --every N`): one optimizer step in N is recorded, the steps between run with
no dispatch or function mode, module hook or autocast wrapper of the audit in their way, and the report says which were seen."""

import json

import torch
from tests.audit.test_audit_threads import AUTOCAST, _globals
from torch.overrides import _get_current_function_mode_stack
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

import ampdoctor


def _step(model, opt, retype_grads: bool = False) -> None:
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model(torch.randn(2, 8)).float().sum()
    loss.backward()
    if retype_grads:  # a fault that happens on one step only
        for p in model.parameters():
            p.grad.data = p.grad.data.to(torch.float64)
    opt.step()
    opt.zero_grad()


def _model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def test_one_step_in_n_is_recorded_and_the_others_run_free():
    model, opt = _model()
    with ampdoctor.audit(max_steps=1) as single:
        _step(model, opt)
    per_step = len([r for r in single.recorder.records if not str(single.recorder.ops[r[1]]).startswith("profiler.")])
    before = _globals()
    wrapped_between = []
    with ampdoctor.audit(every=3) as a:
        for i in range(1, 11):
            _step(model, opt)
            # after step i: recording again only when step i+1 is a sample (i+1 = 4, 7, 10)
            wrapped_between.append((i, bool(_get_current_dispatch_mode_stack()), AUTOCAST.__dict__["__enter__"] is not before[0],
                                    bool(_get_current_function_mode_stack())))
    assert a.recorder.recorded_steps == [1, 4, 7, 10] and a.recorder.steps_seen == 10
    # (a window opens inside the optimizer step before the sample, so it also holds the profiler markers that close it)
    ops = [str(a.recorder.ops[r[1]]) for r in a.recorder.records]
    assert len([op for op in ops if not op.startswith("profiler.")]) == 4 * per_step
    assert [i for i, mode, _, _ in wrapped_between if mode] == [3, 6, 9]
    assert [i for i, _, _, calls in wrapped_between if calls] == [3, 6, 9]  # the function mode (attention calls) too
    assert all(patched for _, _, patched, _ in wrapped_between)  # the autocast wrappers follow autocast through pauses
    assert _globals() == before
    assert a.report.info["recorded_steps"] == [1, 4, 7, 10]
    assert any(n.startswith("sampled: 4 of 10 optimizer steps recorded (one in 3: 1, 4, 7, 10)") for n in a.report.info["notes"])


def test_a_fault_on_a_sampled_step_is_found_and_max_steps_caps_the_samples():
    model, opt = _model()
    with ampdoctor.audit("bf16-mixed", every=2, max_steps=3) as a:
        for i in range(1, 9):
            _step(model, opt, retype_grads=i == 5)
    assert a.recorder.recorded_steps == [1, 3, 5]
    assert "grad-dtype-mismatch" in {f.name for f in a.report.findings}
    with ampdoctor.audit("bf16-mixed", every=2) as b:
        for i in range(1, 9):
            _step(model, opt, retype_grads=i == 4)  # between samples: not seen, and the report says what was recorded
    assert b.recorder.recorded_steps == [1, 3, 5, 7]
    assert "grad-dtype-mismatch" not in {f.name for f in b.report.findings}


def test_run_every_from_the_cli(tmp_path):
    from ampdoctor.cli import main

    script = tmp_path / "train.py"
    script.write_text(
        "import torch\n"
        "m = torch.nn.Linear(4, 4)\n"
        "opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for step in range(7):\n"
        "    m(torch.randn(2, 4)).sum().backward()\n"
        "    opt.step(); opt.zero_grad()\n"
    )
    out = tmp_path / "r.json"
    assert main(["run", "--policy", "fp32", "--every", "3", "--format", "json", "-o", str(out), str(script)]) == 0
    data = json.loads(out.read_text())
    assert data["info"]["recorded_steps"] == [1, 4, 7] and data["findings"] == []
    assert main(["run", "--every", "0", str(script)]) == 2


def test_optimizer_stepped_inside_backward_leaves_no_mode_behind():
    # torchtune's optimizer_in_bwd: each parameter's optimizer steps in a post-accumulate-grad hook, inside an autograd
    # node, where autograd restores the dispatch-mode stack when the node ends: the mode must not be popped there.
    for kwargs in ({"max_steps": 1}, {"every": 3}):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
        opts = {p: torch.optim.SGD([p], lr=0.01) for p in model.parameters()}
        for p in model.parameters():
            p.register_post_accumulate_grad_hook(lambda p: opts[p].step())
        before = _globals()
        with ampdoctor.audit(**kwargs) as a:
            for _ in range(3):
                model(torch.randn(2, 8)).sum().backward()
        assert a.recorder.recorded_steps[0] == 1 and _globals() == before and not _get_current_dispatch_mode_stack(), kwargs


def test_a_step_that_raises_and_is_caught_does_not_end_sampling_or_recording():
    # torch runs no post-hook when step() raises: a loop that skips a bad batch must not leave the step open for good
    model, opt = _model()

    def closure_for(i):
        def closure():
            opt.zero_grad()
            loss = model(torch.randn(2, 8)).sum()
            loss.backward()
            if i in (2, 5):  # 2: a paused step, 5: a sampled one (neither counts as a step: none ended)
                raise RuntimeError("bad batch")
            return loss
        return closure

    before = _globals()
    with ampdoctor.audit(every=3, max_steps=3) as a:
        for i in range(1, 13):
            try:
                opt.step(closure_for(i))  # the closure positionally, as LBFGS users write it
            except RuntimeError:
                pass
        assert not a.recorder.active  # stopped after its 3 samples, not recording on for good
    # steps that ended: i=1 (recorded), 3, 4, 6 (the sample after the one that raised), 7, 8, 9 (recorded): max_steps reached
    assert a.recorder.recorded_steps == [1, 4, 7] and a.recorder.steps_seen == 7 and _globals() == before
    # the closure was seen as the step's forward and backward: its ops are no optimizer ops
    from ampdoctor.audit.fields import FORWARD, PHASE

    ops = {str(a.recorder.ops[r[1]]): r[PHASE] for r in a.recorder.records}
    assert ops["aten.addmm.default"] == FORWARD and all(e.backward_passes == 1 for e in a.recorder.opt_events)


def test_autocast_that_ends_after_recording_resumes_is_seen_ending():
    # the loop body (optimizer step included) under autocast: the sample resumes inside a block whose __exit__ Python
    # looked up before; ops after that block must not be recorded as autocast ops
    from ampdoctor.audit.fields import AUTOCAST, PHASE

    model, opt = _model()
    with ampdoctor.audit(every=2) as a:
        for _ in range(5):
            x = torch.randn(2, 8) * 2  # outside autocast
            with torch.autocast("cpu", dtype=torch.bfloat16):
                model(x).float().sum().backward()
                opt.step()
            opt.zero_grad()
    r = a.recorder
    muls = [rec[AUTOCAST] for rec in r.records if str(r.ops[rec[1]]) == "aten.mul.Tensor" and rec[PHASE] == "forward"]
    assert r.recorded_steps == [1, 3, 5] and muls == [False, False, False]


def test_a_sample_that_cannot_be_taken_is_counted_in_the_note():
    from torch.utils._python_dispatch import TorchDispatchMode

    class Passthrough(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    model, opt = _model()
    with ampdoctor.audit(every=2) as a:
        _step(model, opt)  # recorded, then paused with no mode of ours on the stack
        for _ in range(4):
            with Passthrough():  # the script's own mode is on the stack when each step ends: no sample is taken
                _step(model, opt)
    assert a.recorder.recorded_steps == [1] and a.recorder.samples_skipped == 2
    assert any("2 sample(s) not taken" in n for n in a.report.info["notes"])
