"""Optimizer tracking for the audit: global optimizer step hooks that mark the optimizer phase, count micro-batches
and steps, snapshot `.grad` dtypes at micro-batch boundaries, and measure how many half-precision weight updates
rounded away (a sample of each parameter before and after the step)."""

from __future__ import annotations

import threading
import weakref
from typing import Any

import torch

from ampdoctor.audit.dispatch import _FLOATS, _HALF
from ampdoctor.audit.evidence import GradSnapshot, OptimizerStep, When
from ampdoctor.audit.watch import no_values


class OptimizerTracking:
    """The optimizer half of `Recorder`; the state it reads and writes is set up in `Recorder.__init__`."""

    def _micro_batch_boundary(self) -> None:
        """A root module is entered: a new micro-batch. `.grad` left by the previous one is what the
        next backward accumulates into (incident 3)."""
        if self.saw_backward:
            self.backward_passes += 1
            self.saw_backward = False
            self.snapshot_grads(When.BEFORE_MICRO_BATCH)

    def snapshot_grads(self, when: When) -> None:
        for pid, ref in list(self.params.items()):
            p = ref()
            if p is not None and p.grad is not None:
                self.grad_events.append(GradSnapshot(when, self.backward_passes, pid, p.grad.dtype, expected_grad_dtype(p)))

    def _opt_pre(self, opt: Any, args: Any, kwargs: Any) -> Any:
        # The same optimizer stepping again while its step is still open: that step raised out of torch's step()
        # (torch runs no post-hook then) and the loop went on. Its depth count is stale, not a nested step.
        stale = self._outer_step is not None and self._outer_step() is opt
        if self.paused and threading.get_ident() == self._thread:
            if stale or not self._paused_depth:
                self._paused_depth = 0
                self._outer_step = weakref.ref(opt)
            self._paused_depth += 1
            return None
        if not self.active or not self.here():
            return None
        if stale and self._step_depth:
            self._step_raised()
        if not self._step_depth:
            self._outer_step = weakref.ref(opt)
        self._step_depth += 1
        if self._step_depth > 1:
            return None
        # torch hands the pre-hooks step()'s own arguments: (optimizer, closure?) positionally, or closure= by keyword.
        closure = kwargs.get("closure") if kwargs else (args[1] if len(args) > 1 and callable(args[1]) else None)
        if closure is not None:
            # `step(closure)` (Lightning, LBFGS) runs the forward and backward inside the step: the step begins for
            # the record once the closure has returned, with the gradients it made.
            def measured_closure() -> Any:
                self.in_optimizer = False
                self._in_closure = True
                try:
                    return closure()
                finally:
                    self._in_closure = False
                    self._begin_step(opt)

            if kwargs and "closure" in kwargs:
                return args, {**kwargs, "closure": measured_closure}
            return (args[0], measured_closure, *args[2:]), kwargs
        self._begin_step(opt)
        return None

    def _step_raised(self) -> None:
        """Close an optimizer step that raised: nothing of it is recorded as a step (its ops stay in the record)."""
        self._step_depth = 0
        self.in_optimizer = False
        self._pending_snapshot = {}
        self.backward_passes = 0  # its micro-batches went with it: the next step's are counted afresh
        self.saw_backward = False

    def _begin_step(self, opt: Any) -> None:
        if self.saw_backward:
            self.backward_passes += 1
            self.saw_backward = False
        self.in_optimizer = True
        if not any(r() is opt for r in self.optimizers):
            self.optimizers.append(weakref.ref(opt))
        samples = []
        for group in opt.param_groups:
            for p in group["params"]:
                self.params.setdefault(id(p), weakref.ref(p))
                if p.grad is None:
                    continue
                self.grad_events.append(GradSnapshot(When.OPTIMIZER_STEP, self.backward_passes, id(p), p.grad.dtype, expected_grad_dtype(p)))
                if p.dtype in _HALF and not no_values(p):
                    n = min(p.numel(), 1 << 16)
                    flat = p.detach().reshape(-1)[:n]
                    samples.append((id(p), p, flat.clone(), p.grad.detach().reshape(-1)[:n].ne(0)))
        self._pending_snapshot = {"samples": samples, "passes": self.backward_passes}

    def _opt_post(self, opt: Any, args: Any, kwargs: Any) -> None:
        if self.paused:
            if threading.get_ident() == self._thread and self._paused_depth > 0:
                self._paused_depth -= 1
                if self._paused_depth == 0:
                    self.steps_seen += 1
                    if self.steps_seen % self.every == 0:  # the next step is a sample
                        self._resume()
            return
        if not self.in_optimizer or not self.here():
            return
        self._step_depth -= 1
        if self._step_depth > 0:
            return
        self.in_optimizer = False
        unchanged = considered = 0
        per_param = []
        for pid, p, before, nonzero in self._pending_snapshot.get("samples", ()):
            after = p.detach().reshape(-1)[: before.numel()]
            same = (after == before) & nonzero
            k = int(same.sum())
            n = int(nonzero.sum())
            unchanged += k
            considered += n
            per_param.append((pid, k, n))
        state_dtypes = {}
        for group in opt.param_groups:
            for p in group["params"]:
                for key, v in opt.state.get(p, {}).items():
                    if isinstance(v, torch.Tensor) and v.dtype in _FLOATS and v.dim() > 0:
                        state_dtypes.setdefault((key, v.dtype), []).append(id(p))
        self.opt_events.append(OptimizerStep(
            optimizer=type(opt).__name__,
            module=type(opt).__module__,
            backward_passes=self._pending_snapshot.get("passes", 0),
            unchanged=unchanged,
            considered=considered,
            per_param=tuple(per_param),
            state_dtypes=state_dtypes,
            frame=self.user_frame(),
        ))
        self._pending_snapshot = {}
        self.backward_passes = 0
        self.optimizer_steps += 1
        self.steps_seen += 1
        self.recorded_steps.append(self.steps_seen)
        if self.max_steps is not None and self.optimizer_steps >= self.max_steps:
            self.stop()
        elif self.every is not None and self.every > 1:
            self._pause()


def expected_grad_dtype(p: Any) -> Any:
    """The dtype `.grad` should have: the parameter's, unless `Tensor.grad_dtype` (torch >= 2.9) asks for another
    on purpose (None there allows any dtype)."""
    return getattr(p, "grad_dtype", p.dtype)
