"""One audit records at a time per process; the recording one sees only its own thread; every global it installs
(module and optimizer hooks, the autocast `__enter__`/`__exit__` wrappers, the dispatch mode) is restored."""

import threading

import pytest
import torch
import torch.nn.modules.module as module_mod
from torch.optim import optimizer as optim_mod
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

import ampdoctor
from ampdoctor.audit.recorder import active_recorder

AUTOCAST = torch.amp.autocast_mode.autocast


def _globals() -> tuple:
    """Everything process-wide an audit touches, by identity and size."""
    return (AUTOCAST.__dict__["__enter__"], AUTOCAST.__dict__["__exit__"], len(module_mod._global_forward_pre_hooks),
            len(module_mod._global_forward_hooks), len(optim_mod._global_optimizer_pre_hooks),
            len(optim_mod._global_optimizer_post_hooks), len(_get_current_dispatch_mode_stack()), active_recorder())


def _train(steps: int, width: int = 4) -> torch.nn.Module:
    model = torch.nn.Linear(width, width)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(torch.randn(2, width)).float().sum()
        loss.backward()
        opt.step()
        opt.zero_grad()
    return model


def test_second_audit_in_another_thread_is_refused_and_the_first_sees_only_its_thread():
    before = _globals()
    started, done = threading.Barrier(2, timeout=60), threading.Barrier(2, timeout=60)
    out: dict = {}

    def audited() -> None:
        with ampdoctor.audit(checked=("thread one",)) as a:
            started.wait()
            out["model"] = _train(2)
            done.wait()
        out["audit"] = a

    def other() -> None:
        started.wait()
        try:
            with ampdoctor.audit(checked=("thread two",)):
                out["entered"] = True
        except RuntimeError as err:
            out["refused"] = str(err)
        _train(5, width=8)  # trains unaudited while thread one records
        done.wait()

    threads = [threading.Thread(target=audited), threading.Thread(target=other)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert "entered" not in out
    assert "cannot start ampdoctor.audit of thread two" in out["refused"]
    assert "ampdoctor.audit of thread one is already recording" in out["refused"] and "another thread" in out["refused"]
    rec = out["audit"].recorder
    # Only thread one's two steps of its one Linear(4, 4): none of thread two's five steps or its Linear(8, 8).
    assert rec.optimizer_steps == 2
    assert [(m.cls, m.calls) for m in rec.modules] == [("Linear", 2)]
    assert out["audit"].report.checked == ("thread one",)
    assert _globals() == before


def test_nested_audit_is_refused_and_the_outer_one_restores_everything():
    before = _globals()
    with ampdoctor.audit(checked=("outer",)) as outer:
        inside = _globals()
        with pytest.raises(RuntimeError, match=r"ampdoctor.audit of outer is already recording .*\(entered in this thread\)"):
            with ampdoctor.audit(checked=("inner",)):
                pass
        assert _globals() == inside  # the refused audit installed nothing and removed nothing
        _train(1)
    assert outer.recorder.optimizer_steps == 1
    assert _globals() == before


def test_audits_exited_out_of_order_restore_autocast():
    before = _globals()
    first, second = ampdoctor.audit(), ampdoctor.audit()
    first.__enter__()
    with pytest.raises(RuntimeError):
        second.__enter__()
    second.__exit__(None, None, None)  # exiting the refused one first changes nothing of the first's
    assert AUTOCAST.__dict__["__enter__"] is not before[0]
    _train(1)
    first.__exit__(None, None, None)
    assert first.recorder.optimizer_steps == 1
    assert _globals() == before
    with ampdoctor.audit() as again:  # the slot is free again
        _train(1)
    assert again.recorder.optimizer_steps == 1 and _globals() == before


def test_exception_in_the_audited_block_restores_everything_and_propagates():
    before = _globals()
    with pytest.raises(ZeroDivisionError):
        with ampdoctor.audit() as a:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                _train(1)
                1 / 0
    assert _globals() == before
    assert isinstance(a.exception, ZeroDivisionError)
    assert a.report.checked == ("training step",)


def test_a_patch_made_over_the_audit_survives_and_the_wrapper_left_under_it_is_inert():
    original = AUTOCAST.__dict__["__enter__"]
    with ampdoctor.audit() as a:
        wrapped = AUTOCAST.__dict__["__enter__"]

        def user_enter(self):  # e.g. a profiler patching autocast while the audit runs
            return wrapped(self)

        AUTOCAST.__enter__ = user_enter
    try:
        assert AUTOCAST.__dict__["__enter__"] is user_enter  # not undone by the audit's exit
        a.recorder.autocast_dtypes.clear()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            pass
        assert a.recorder.autocast_dtypes == set()  # the ended recording hears nothing through it
    finally:
        AUTOCAST.__enter__ = original


def test_recording_stopped_leaves_the_rest_of_the_script_untouched():
    # `run` stops recording after --max-steps while the script trains on for hours: from then on no dispatch mode,
    # hook or autocast wrapper of the audit may stay in the way of an op, a module call or an optimizer step.
    before = _globals()
    with ampdoctor.audit(max_steps=1) as a:
        _train(1)
        after_stop = _globals()
        recorded = len(a.recorder.records)
        _train(2)
        assert len(a.recorder.records) == recorded and a.recorder.optimizer_steps == 1
    # The mode, the module hooks and the autocast wrappers are gone; the optimizer hooks stay (inert) until exit, and the
    # slot is held until the audit exits.
    assert after_stop[:4] == before[:4] and after_stop[6] == before[6] and after_stop[7] is a.recorder
    assert (after_stop[4], after_stop[5]) == (before[4] + 1, before[5] + 1)
    assert _globals() == before
    assert a.report.checked == ("training step",)


def test_a_mode_entered_over_the_recording_stays_when_it_stops():
    from torch.utils._python_dispatch import TorchDispatchMode

    class Passthrough(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    before = _globals()
    with ampdoctor.audit(max_steps=1) as a:
        with Passthrough() as user_mode:
            _train(1)  # recording stops under the user's mode: ours is not the innermost, so it stays
            stack = _get_current_dispatch_mode_stack()
            assert stack[-1] is user_mode and a.recorder._mode in stack
            _train(1)
        assert _get_current_dispatch_mode_stack()[-1] is a.recorder._mode
    assert a.recorder.optimizer_steps == 1
    assert _globals() == before


def test_recording_stops_inside_torchs_hook_loop_without_breaking_a_later_hook():
    # stop() runs in the audit's optimizer post-hook, inside torch's loop over the global post-hooks: removing a hook
    # there would raise "OrderedDict mutated during iteration" at a hook registered after the audit's.
    seen = []
    with ampdoctor.audit(max_steps=1) as a:
        handle = optim_mod.register_optimizer_step_post_hook(lambda opt, args, kwargs: seen.append(1))
        try:
            _train(2)
        finally:
            handle.remove()
    assert a.recorder.optimizer_steps == 1 and seen == [1, 1]
