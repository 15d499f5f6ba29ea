"""The hot path of the runtime audit: a `TorchDispatchMode` that records every aten op as a compact
tuple, global module hooks that say which module is running, and optimizer hooks that mark the
optimizer phase and count steps. Analysis happens after the step (see `checks.py`).

Everything global this installs (the dispatch mode, module and optimizer hooks, the autocast patch) is removed
in `Recorder.__exit__`, also when the step raises. The module and optimizer hooks and the autocast patch are
process-wide, so one recorder records at a time in a process (`Recorder.__enter__` refuses a second one), and its
hooks ignore modules, optimizers and autocast contexts of threads that run without its dispatch mode.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import threading
import weakref
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ampdoctor.audit.fields import BACKWARD, FORWARD, OPTIMIZER
from ampdoctor.audit.values import EXACT_LIMIT, ValueWatch
from ampdoctor.audit.watch import no_values
from ampdoctor.dtypes import FLOAT_NAMES, HALF, to_torch

_FLOATS = frozenset(to_torch(n) for n in FLOAT_NAMES)
_HALF = frozenset(to_torch(n) for n in HALF)

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_AMPDOCTOR_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_STDLIB_DIRS = tuple({os.path.abspath(p) + os.sep for p in (sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"])})
_AUDIT_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
# Frames between an op call and `__torch_dispatch__` that belong to the mode machinery itself.
_MODE_FILES = (_AUDIT_DIR, os.path.join(_TORCH_DIR, "utils", "_python_dispatch.py"), os.path.join(_TORCH_DIR, "_dynamo"), os.path.join(_TORCH_DIR, "_compile.py"))

# The recorder holding the process-wide hooks (None: none), and the lock that makes taking it atomic.
_ACTIVE_LOCK = threading.Lock()
_active: "Recorder | None" = None


def active_recorder() -> "Recorder | None":
    """The recorder recording in this process now, if any."""
    return _active


def _mode_stack() -> list:
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    return _get_current_dispatch_mode_stack()


_current_autograd_node = torch._C._current_autograd_node
_peek_sequence_nr = torch.autograd._get_sequence_nr
# The sequence number of AccumulateGrad nodes, which have none (UINT64_MAX).
_NO_SEQUENCE_NR = (1 << 64) - 1

# Records are plain tuples (fields named in `fields`). Computing `f_lineno` for every op costs more than the
# rest of the frame walk, so LASTI keeps the instruction offset. FUNC is the op's id: with no reference to a
# GC-tracked object, the garbage collector untracks a record at its first pass instead of re-scanning ~10^5
# of them in full collections (a quarter of a second per 70B fake step).


def line_of(code: Any, lasti: int) -> int:
    """The source line of the instruction at byte offset `lasti` in `code` (what `f_lineno` says)."""
    for start, end, line in code.co_lines():
        if start <= lasti < end:
            return line or 0
    return 0


def _flatten(args: Any, out: list) -> None:
    for a in args:
        if isinstance(a, torch.Tensor):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            for b in a:
                if isinstance(b, torch.Tensor):
                    out.append(b)


def _inputs(r: "Recorder", ins: list) -> tuple[tuple, tuple]:
    """The dtypes of an op's tensor inputs and, for float ones, their producer's seq or minus the id of a leaf
    (parameter, buffer, input: named later); a leaf's values are measured the first time it is read."""
    prov = r.producers
    values = r.values
    in_dt = []
    in_prod = []
    for t in ins:
        dt = t.dtype
        in_dt.append(dt)
        if dt in _FLOATS:
            entry = prov.get(id(t))
            if entry is not None and entry[0]() is t:
                in_prod.append(entry[1])
            else:
                in_prod.append(-id(t))
                if values is not None:
                    values.leaf(t, len(r.records))
        else:
            in_prod.append(None)
    return tuple(in_dt), tuple(in_prod)


@dataclass
class ModuleInfo:
    ref: Callable[[], Any]
    cls: str
    parent: int  # index of the module that was running when this one was first entered, -1 for none
    inputs: set = field(default_factory=set)
    outputs: set = field(default_factory=set)
    calls: int = 0
    # (code, line) of the user frame that called this module first.
    caller: tuple | None = None


@dataclass
class Failure:
    seq: int
    exc: BaseException


class _Mode(TorchDispatchMode):
    def __init__(self, recorder: "Recorder") -> None:
        super().__init__()
        self.r = recorder

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: C901 - the hot path, kept flat
        kwargs = kwargs or {}
        r = self.r
        if not r.active:
            return func(*args, **kwargs)
        ins: list = []
        _flatten(args, ins)
        if kwargs:
            _flatten(kwargs.values(), ins)
        prov = r.producers
        values = r.values
        in_dt, in_prod = _inputs(r, ins)
        extra = None
        node = _current_autograd_node()
        if node is None:
            mod = r.stack[-1] if r.stack else -1
            phase = OPTIMIZER if (r.in_optimizer or (r.saw_backward and not r.stack)) else FORWARD
            if values is not None and phase == FORWARD:
                values.forward_nrs.append((len(r.records), _peek_sequence_nr()))
        else:
            phase = BACKWARD
            nr = node._sequence_nr()
            if nr == _NO_SEQUENCE_NR:
                mod = -1
                var = getattr(node, "variable", None)
                if var is not None:
                    extra = ("accumulate", id(var))
            else:
                mod = r.module_at(nr)
                if values is not None:
                    values.backward_nrs[len(r.records)] = nr
            r.saw_backward = True
        code, lasti, inner = r.frames()
        autocast = r.autocast_on
        seq = len(r.records)
        fid = id(func)
        if fid not in r.ops:
            r.ops[fid] = func
        try:
            out = func(*args, **kwargs)
        except Exception as exc:
            r.records.append((seq, fid, in_dt, in_prod, None, mod, phase, code, lasti, inner, autocast, extra))
            r.failure = Failure(seq, exc)
            raise
        outs: list = []
        if isinstance(out, torch.Tensor):
            outs.append(out)
        elif isinstance(out, (list, tuple)):
            _flatten(out, outs)
        out_dt = []
        for t in outs:
            dt = t.dtype
            out_dt.append(dt)
            if dt in _FLOATS:
                # No weakref callback: a dead entry is recognised by its dead ref, and one callback
                # per output costs more than the entries it would drop (`release` clears them).
                prov[id(t)] = (weakref.ref(t), seq)
        if values is not None and (out_dt or out is None):
            values.output(seq, fid, func, args, kwargs, outs, phase == OPTIMIZER)
        watch = r.watch.get(fid)
        if watch is not None:
            extra = watch(r, func, args, kwargs, out, ins)
        r.records.append((seq, fid, in_dt, in_prod, tuple(out_dt), mod, phase, code, lasti, inner, autocast, extra))
        return out


class Recorder:
    """Install with `with Recorder(...)`; `records` holds one tuple per op (fields: SEQ, FUNC, ...)."""

    def __init__(self, *, device_type: str = "cpu", max_steps: int | None = None, on_stop: Callable[[], None] | None = None,
                 watch_values: bool | str = True, every: int | None = None) -> None:
        if every is not None and every < 1:
            raise ValueError(f"every must be at least 1, not {every}")
        self.device_type = device_type
        self.max_steps = max_steps  # optimizer steps recorded, at most
        # Sampling: record one optimizer step in `every` (the 1st, the every+1st, ...) until max_steps are recorded;
        # between samples the recording is paused: no dispatch mode, module hook or autocast wrapper in the way.
        self.every = every
        self.steps_seen = 0  # optimizer steps the recording thread took, recorded or not
        self.recorded_steps: list[int] = []  # which of them were recorded (1-based)
        self.samples_skipped = 0  # samples not taken: another dispatch mode above where ours was, or inside backward
        self.paused = False
        self._paused_depth = 0
        self._base_stack: list = []  # the dispatch modes under ours when it was entered
        self._outer_step: Any = None  # weakref of the optimizer whose step is the outermost one open
        self._in_closure = False  # inside the closure of a `step(closure)`
        self.on_stop = on_stop
        self.records: list[tuple] = []
        self.ops: dict[int, Any] = {}  # id -> the op (OpOverload) of records' FUNC
        self.producers: dict[int, tuple] = {}
        self.modules: list[ModuleInfo] = []
        self._module_index: dict[int, int] = {}
        self.stack: list[int] = []
        # Parallel to `stack`: (the frame that called the module's forward, its user frame's code and
        # lasti). The frame is on the Python stack for as long as the module runs, so an op's frame
        # walk can stop there and reuse the user frame (transformers stacks are ~25 frames deep).
        self._calls: list[tuple[Any, Any, int]] = []
        # Which module was running from each autograd sequence number on: a backward op's node was
        # created by a forward op, and its sequence number says in which module (no trace left on
        # the graph, unlike writing to `grad_fn.metadata`).
        self._scope_nrs: list[int] = []
        self._scope_mods: list[int] = []
        self.active = False
        self.in_optimizer = False
        # Optimizers that step an inner optimizer (an fp32 master copy around AdamW) nest steps: only the
        # outermost one is the step the training loop took, so only it is measured and recorded.
        self._step_depth = 0
        self.saw_backward = False
        self.backward_passes = 0
        self.optimizer_steps = 0
        self.failure: Failure | None = None
        self.autocast_dtypes: set = set()
        self.autocast_on = False
        # Modules seen are kept alive until the report is built, so that their names resolve even
        # when the script has dropped the model; `release()` lets go.
        self._alive: list[Any] = []
        self._autocast_methods: tuple | None = None
        self._autocast_wrappers: tuple = (None, None)
        self.optimizers: list[Any] = []  # weakrefs
        self.opt_events: list[dict] = []
        # grad snapshots taken at micro-batch boundaries: (when, param id, grad dtype, param dtype)
        self.grad_events: list[tuple] = []
        self.params: dict[int, Any] = {}  # id -> weakref of parameters of modules seen
        self.module_scans: list[tuple] = []  # (module index, attr name, dtype, shape, max_abs or None)
        self._scanned: set[int] = set()
        # id(code) -> (mode machinery?, internal?, code); holding the code keeps its id unique.
        # Keyed by id because hashing a code object hashes its bytecode and constants.
        self._internal: dict[int, tuple[bool, bool, Any]] = {}
        self._handles: list[Any] = []  # every hook installed
        self._module_handles: list[Any] = []  # of them, the module forward hooks (removed when recording stops)
        self._mode: _Mode | None = None
        # What this recording is, for the message that refuses a second one ("the audit of train.py").
        self.label = "an audit"
        self._thread: int | None = None  # the thread that entered it
        self._pending_snapshot: dict[int, tuple] = {}
        from ampdoctor.audit import watch

        self.watch = watch.WATCHED
        # Per-op value statistics (amax, overflow/underflow counts) for the value checks: False turns them off,
        # "exact" reads every element of large results too (see `values.EXACT_LIMIT`).
        self.values: ValueWatch | None = None
        if watch_values:
            self.values = ValueWatch(self.params, exact_limit=None if watch_values == "exact" else EXACT_LIMIT)

    def param_objects(self) -> list[Any]:
        """The parameters seen (of modules entered and of optimizers stepped) that are still alive."""
        return [p for p in (ref() for ref in self.params.values()) if p is not None]

    # --- provenance housekeeping ---------------------------------------------------------------

    def producer_of(self, t: torch.Tensor) -> int:
        entry = self.producers.get(id(t))
        return entry[1] if entry is not None and entry[0]() is t else -1

    # --- frames ----------------------------------------------------------------------------------

    def _classify(self, code: Any) -> tuple[bool, bool, Any]:
        name = code.co_filename
        path = os.path.abspath(name) if not name.startswith("<") else name
        mode = path.startswith(_MODE_FILES)
        internal = mode or path.startswith(_TORCH_DIR) or path.startswith(_AMPDOCTOR_DIR) or path.startswith(_STDLIB_DIRS) or name.startswith("<frozen")
        out = (mode, internal, code)
        self._internal[id(code)] = out
        return out

    def frames(self, f: Any = None) -> tuple[Any, int, tuple | None]:
        """(code, lasti) of the first frame outside torch/ampdoctor/stdlib, and (code id, lasti) of
        the innermost frame that called the op (shared by autocast's casts and the op they feed).
        Walks from `f`, by default the caller of the caller."""
        if f is None:
            f = sys._getframe(2)
        inner = None
        cache = self._internal
        call = self._calls[-1] if self._calls else None
        stop = call[0] if call is not None else None
        while f is not None:
            if f is stop:
                # Everything above is as it was when the running module was entered.
                return call[1], call[2], inner or (id(f.f_code), f.f_lasti)
            c = f.f_code
            kind = cache.get(id(c)) or self._classify(c)
            if inner is None and not kind[0]:
                inner = (id(c), f.f_lasti)
            if not kind[1]:
                return c, f.f_lasti, inner
            f = f.f_back
        return None, 0, inner

    def user_frame(self) -> tuple[Any, int]:
        """(code, line) of the first user frame above the caller."""
        code, lasti, _ = self.frames(sys._getframe(1))
        return code, line_of(code, lasti) if code is not None else 0

    # --- modules ---------------------------------------------------------------------------------

    def _scope_changed(self) -> None:
        self._scope_nrs.append(_peek_sequence_nr())
        self._scope_mods.append(self.stack[-1] if self.stack else -1)

    def module_at(self, sequence_nr: int) -> int:
        """The module that was running when the autograd node numbered `sequence_nr` was created."""
        i = bisect_right(self._scope_nrs, sequence_nr) - 1
        return self._scope_mods[i] if i >= 0 else -1

    def module_index_of(self, m: torch.nn.Module) -> int | None:
        """The index of a module seen while recording, None for one never entered."""
        idx = self._module_index.get(id(m))
        return idx if idx is not None and self.modules[idx].ref() is m else None

    def module_index(self, m: torch.nn.Module) -> int:
        idx = self._module_index.get(id(m))
        if idx is not None and self.modules[idx].ref() is m:
            return idx
        idx = len(self.modules)
        self._module_index[id(m)] = idx
        self.modules.append(ModuleInfo(weakref.ref(m), type(m).__name__, self.stack[-1] if self.stack else -1))
        self._alive.append(m)
        for p in m.parameters(recurse=False):
            self.params.setdefault(id(p), weakref.ref(p))
        return idx

    def here(self) -> bool:
        """The caller runs under this recording: in the thread that entered it, or in a thread that carries its
        dispatch mode (autograd's device threads running a CUDA backward, with checkpointed forwards in it)."""
        return threading.get_ident() == self._thread or (self._mode is not None and self._mode in _mode_stack())

    def _pre_hook(self, m: torch.nn.Module, args: Any) -> None:
        if not self.active or not self.here():
            return
        if not self.stack:
            # A root module begins a micro-batch. Autocast is read again here: a block whose `__exit__` was looked up
            # before the recording resumed exits unseen by the wrapper.
            self.refresh_autocast()
            if self.in_optimizer and self._step_depth and not self._in_closure:
                self._step_raised()  # an optimizer step raised out of torch's step() (no post-hook came) and was caught
            self._micro_batch_boundary()
        idx = self.module_index(m)
        info = self.modules[idx]
        info.calls += 1
        # The frame that runs the hooks also calls forward.
        call = sys._getframe(1)
        code, lasti, _ = self.frames(call)
        if info.caller is None:
            info.caller = (code, line_of(code, lasti) if code is not None else 0)
        if idx not in self._scanned:
            self._scanned.add(idx)
            self.scan_module(idx, "before")
        ins: list = []
        _flatten(args, ins)
        info.inputs.update(t.dtype for t in ins if t.dtype in _FLOATS)
        self.stack.append(idx)
        self._calls.append((call, code, lasti))
        self._scope_changed()

    def _post_hook(self, m: torch.nn.Module, args: Any, output: Any) -> None:
        if not self.stack or not self.here():
            return
        idx = self.stack.pop()
        self._calls.pop()
        self._scope_changed()
        outs: list = []
        if isinstance(output, torch.Tensor):
            outs.append(output)
        elif isinstance(output, (list, tuple)):
            _flatten(output, outs)
        elif isinstance(output, dict) or hasattr(output, "values"):
            try:
                _flatten(list(output.values()), outs)
            except Exception:  # an exotic output container: dtypes are a nicety, never a failure
                pass
        self.modules[idx].outputs.update(t.dtype for t in outs if t.dtype in _FLOATS)

    def scan_module(self, idx: int, when: str) -> None:
        """Buffers and tensor attributes (the rotary caches of B2 live in both), for rope-cache checks."""
        m = self.modules[idx].ref()
        if m is None:
            return
        items = list(m._buffers.items()) + [(k, v) for k, v in vars(m).items() if isinstance(v, torch.Tensor) and not isinstance(v, torch.nn.Parameter)]
        for name, t in items:
            if isinstance(t, torch.Tensor) and t.dtype in _FLOATS:
                self.module_scans.append((idx, name, t.dtype, tuple(t.shape), when, weakref.ref(t)))

    # --- micro-batches and the optimizer ---------------------------------------------------------

    def _micro_batch_boundary(self) -> None:
        """A root module is entered: a new micro-batch. `.grad` left by the previous one is what the
        next backward accumulates into (incident 3)."""
        if self.saw_backward:
            self.backward_passes += 1
            self.saw_backward = False
            self.snapshot_grads("before micro-batch")

    def snapshot_grads(self, when: str) -> None:
        for pid, ref in list(self.params.items()):
            p = ref()
            if p is not None and p.grad is not None:
                self.grad_events.append((when, self.backward_passes, pid, p.grad.dtype, expected_grad_dtype(p)))

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
                self.grad_events.append(("optimizer step", self.backward_passes, id(p), p.grad.dtype, expected_grad_dtype(p)))
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
        self.opt_events.append({
            "optimizer": type(opt).__name__,
            "module": type(opt).__module__,
            "backward_passes": self._pending_snapshot.get("passes", 0),
            "unchanged": unchanged,
            "considered": considered,
            "per_param": per_param,
            "state_dtypes": state_dtypes,
            "frame": self.user_frame(),
        })
        self._pending_snapshot = {}
        self.backward_passes = 0
        self.optimizer_steps += 1
        self.steps_seen += 1
        self.recorded_steps.append(self.steps_seen)
        if self.max_steps is not None and self.optimizer_steps >= self.max_steps:
            self.stop()
        elif self.every is not None and self.every > 1:
            self._pause()

    # --- install / remove ------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop recording (the script keeps running); the report is built from what was recorded."""
        if not (self.active or self.paused):
            return
        self.paused = False
        if self.saw_backward:
            self.backward_passes += 1
            self.saw_backward = False
        self.snapshot_grads("end")
        for idx in range(len(self.modules)):
            self.scan_module(idx, "after")
        self.active = False
        if self.values is not None:
            self.values.flush()
        self._detach()
        if self.on_stop is not None:
            self.on_stop()

    def _pause(self) -> None:
        """Between two sampled steps: recording is off and out of the way until `_resume`."""
        self.active = False
        self.paused = True
        self._paused_depth = 0
        if self.values is not None:
            self.values.flush()
            self.values.new_window()
        # What unrecorded steps do to a tensor (in-place updates, a cache refilled) is not seen: its producer and
        # value record from this sample would be stale in the next one, so the next sample starts without them.
        self.producers.clear()
        self._detach(keep_autocast=True)  # the wrappers follow autocast through the pause (one call per context)

    def _resume(self) -> None:
        """Record the next step (called at the end of the step before it, in torch's loop over the optimizer
        post-hooks: module hooks, not optimizer hooks, may be added here). The dispatch mode goes back on the stack
        only where the stack is as it was when the audit was entered; otherwise this sample is skipped."""
        if self._mode is None:  # (else it stayed under a mode the script entered above it, passing ops through)
            if _mode_stack() != self._base_stack or _current_autograd_node() is not None:
                self.samples_skipped += 1
                return  # (inside a backward node, autograd restores the mode stack when the node ends)
            mode = _Mode(self)
            mode.__enter__()
            self._mode = mode
        self._hook_modules()
        if self._autocast_methods is None:
            self._patch_autocast()
        self.refresh_autocast()
        self.paused = False
        self.active = True

    def _detach(self, keep_autocast: bool = False) -> None:
        """The script runs on after recording stops (often for hours): take the dispatch mode off the stack and
        remove the module hooks and the autocast wrappers now, so later ops and modules pay nothing for the audit. The mode
        comes off only when it is this thread's innermost one (a mode the script entered above it is left in place,
        and ours passes its ops through until the audit exits); the recording slot is held until the audit exits."""
        # Not inside a backward node (an optimizer stepped from a post-accumulate-grad hook): autograd restores the
        # mode stack when the node ends, which would put the mode back with nothing left to take it off.
        if self._mode is not None and _mode_stack()[-1:] == [self._mode] and _current_autograd_node() is None:
            mode, self._mode = self._mode, None
            mode.__exit__(None, None, None)
        if not keep_autocast:
            self._unpatch_autocast()
        # Module hooks go now. The optimizer hooks stay until exit: stop() runs inside torch's loop over the global
        # optimizer post-hooks, which raises "OrderedDict mutated during iteration" at the next hook if one is removed
        # (a hook registered after ours); inert once recording stopped, they cost one call per optimizer step.
        self._remove_hooks(self._module_handles)

    def _claim(self) -> None:
        """Take the process's one recording slot, or refuse with the recording that holds it."""
        global _active
        with _ACTIVE_LOCK:
            holder = _active
            if holder is not None:
                where = "this thread" if holder._thread == threading.get_ident() else "another thread"
                raise RuntimeError(
                    f"ampdoctor: cannot start {self.label}: {holder.label} is already recording in this process "
                    f"(entered in {where}). One audit records at a time (the module, optimizer and autocast hooks it "
                    f"installs are process-wide): exit that audit first.")
            _active = self
            self._thread = threading.get_ident()

    def _unclaim(self) -> None:
        global _active
        with _ACTIVE_LOCK:
            if _active is self:
                _active = None

    def __enter__(self) -> "Recorder":
        from torch.optim import optimizer as optim_mod

        self._claim()
        try:
            self._install(optim_mod)
        except BaseException:
            self._unclaim()
            raise
        self.active = True
        return self

    def _install(self, optim_mod: Any) -> None:
        self._base_stack = _mode_stack()
        self._mode = _Mode(self)
        self._handles = [
            optim_mod.register_optimizer_step_pre_hook(self._opt_pre),
            optim_mod.register_optimizer_step_post_hook(self._opt_post),
        ]
        try:
            self._hook_modules()
            self._patch_autocast()
            self.refresh_autocast()
            self._mode.__enter__()
        except BaseException:
            self._mode = None
            self._unpatch_autocast()
            self._remove_hooks()
            raise

    def _hook_modules(self) -> None:
        """The global module forward hooks: installed on entry and again when a sample resumes."""
        import torch.nn.modules.module as module_mod

        self._module_handles = [module_mod.register_module_forward_pre_hook(self._pre_hook),
                                module_mod.register_module_forward_hook(self._post_hook, always_call=True)]
        self._handles.extend(self._module_handles)

    def refresh_autocast(self) -> None:
        # Inside __torch_dispatch__ autocast always reads as disabled, so the state is tracked at
        # Python level: on entry and on every autocast context enter/exit.
        on = torch.is_autocast_enabled(self.device_type)
        self.autocast_on = on
        if on:
            self.autocast_dtypes.add(torch.get_autocast_dtype(self.device_type))

    def autocast_changed(self) -> None:
        """An autocast context was entered or exited. While paused between samples the state is only followed (a
        context entered there may exit after recording resumes, through the `__exit__` Python looked up on entry)."""
        if self.paused and self.here():
            self.autocast_on = torch.is_autocast_enabled(self.device_type)
        elif self._mode is not None and self.here():
            self.refresh_autocast()

    def _patch_autocast(self) -> None:
        cls = torch.amp.autocast_mode.autocast
        enter, exit_ = cls.__enter__, cls.__exit__
        self._autocast_methods = (cls, enter, exit_)
        recorder = self

        # Autocast state is per thread: another thread's contexts say nothing about this recording. Once the
        # recording has ended the wrappers only call through, so one left behind (re-installed by code that saved
        # it while the audit ran and restores it later) changes nothing.
        def __enter__(ac: Any) -> Any:
            out = enter(ac)
            recorder.autocast_changed()
            return out

        def __exit__(ac: Any, *exc: Any) -> Any:
            out = exit_(ac, *exc)
            recorder.autocast_changed()
            return out

        cls.__enter__, cls.__exit__ = __enter__, __exit__
        self._autocast_wrappers = (__enter__, __exit__)

    def _unpatch_autocast(self) -> None:
        if self._autocast_methods is None:
            return
        cls, enter, exit_ = self._autocast_methods
        ours_enter, ours_exit = self._autocast_wrappers
        # Restore what was there, unless code that ran inside the audit has patched autocast over the wrapper: its
        # patch stays (restoring would undo it), and the wrapper underneath only calls through from now on.
        if cls.__dict__.get("__enter__") is ours_enter:
            cls.__enter__ = enter
        if cls.__dict__.get("__exit__") is ours_exit:
            cls.__exit__ = exit_
        self._autocast_methods = None

    def release(self) -> None:
        """Drop everything that keeps the user's objects alive (after the report is built)."""
        self._alive.clear()
        self.producers.clear()
        self._internal.clear()
        self.failure = None
        if self.values is not None:
            self.values.release()

    def _remove_hooks(self, handles: list | None = None) -> None:
        """Remove `handles` (default: every hook installed)."""
        gone = {id(h) for h in (self._handles if handles is None else handles)}
        for h in self._handles:
            if id(h) in gone:
                h.remove()
        self._handles = [h for h in self._handles if id(h) not in gone]
        self._module_handles = [h for h in self._module_handles if id(h) not in gone]

    def __exit__(self, *exc: Any) -> None:
        try:
            if self.active or self.paused:
                self.stop()
        finally:
            try:
                if self._mode is not None:
                    self._mode.__exit__(*exc)
            finally:
                self._mode = None
                try:
                    self._unpatch_autocast()
                    self._remove_hooks()
                finally:
                    self.stack.clear()
                    self._calls.clear()
                    self._unclaim()


def expected_grad_dtype(p: Any) -> Any:
    """The dtype `.grad` should have: the parameter's, unless `Tensor.grad_dtype` (torch >= 2.9) asks for another
    on purpose (None there allows any dtype)."""
    return getattr(p, "grad_dtype", p.dtype)
