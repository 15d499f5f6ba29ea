"""The runtime audit's recorder, composed of small parts as torch composes `FlopCounterMode`: a public context
manager (`Recorder`) over a private dispatch mode (`dispatch.RecordingMode`, which records every aten op as a
compact tuple), module tracking (`modules`), optimizer tracking with gradient snapshots (`optimizer`), the autocast
watch (`autocast_watch`), sampling (`sampler`) and the process-wide recording slot (`slot`). Analysis happens after
the step (`analysis.py`, over the `provenance.Trace` that names the records).

Everything global this installs (the dispatch mode, module and optimizer hooks, the autocast patch) is removed
in `Recorder.__exit__`, also when the step raises. The module and optimizer hooks and the autocast patch are
process-wide, so one recorder records at a time in a process (`Recorder.__enter__` refuses a second one), and its
hooks ignore modules, optimizers and autocast contexts of threads that run without its dispatch mode.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from ampdoctor.audit.autocast_watch import AutocastWatch
from ampdoctor.audit.calls import AttentionCall, CallTracking
from ampdoctor.audit.dispatch import Failure, FrameWalk, RecordingMode, _current_autograd_node, line_of, mode_stack
from ampdoctor.audit.evidence import BufferScan, GradSnapshot, OptimizerStep, When
from ampdoctor.audit.modules import ModuleInfo, ModuleTracking
from ampdoctor.audit.optimizer import OptimizerTracking, expected_grad_dtype
from ampdoctor.audit.sampler import Sampler
from ampdoctor.audit.slot import active_recorder, claim, unclaim
from ampdoctor.audit.values import EXACT_LIMIT, ValueWatch

# Re-exported: the rest of the audit imports these from here.
__all__ = ["Failure", "ModuleInfo", "Recorder", "active_recorder", "expected_grad_dtype", "line_of"]


class Recorder(FrameWalk, ModuleTracking, OptimizerTracking, AutocastWatch, CallTracking, Sampler):
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
        # id of a float tensor an op made -> the op's seq, and a weakref that tells that tensor from a later one at
        # the same id (two dicts, not one of pairs: one object per output that outlives the op, not two)
        self.producers: dict[int, int] = {}
        self.produced: dict[int, Any] = {}
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
        self.opt_events: list[OptimizerStep] = []
        # `.grad` dtypes at micro-batch boundaries, optimizer steps and the end
        self.grad_events: list[GradSnapshot] = []
        self.params: dict[int, Any] = {}  # id -> weakref of parameters of modules seen
        self.module_scans: list[BufferScan] = []
        self.leaf_deaths: dict[int, int] = {}  # a scanned tensor no recorded op made: minus its id -> records made before it died
        self._scanned: set[int] = set()
        self._expanded: set[int] = set()  # ids of the roots whose whole tree was scanned (`scan_tree`)
        # id(code) -> (mode machinery?, internal?, code, library?, boundary?); holding the code keeps its id unique.
        # Keyed by id because hashing a code object hashes its bytecode and constants.
        self._internal: dict[int, tuple[bool, bool, Any, bool, bool]] = {}
        self._lines: dict[tuple[int, int], int] = {}  # (id(code), lasti) -> line, for codes `_internal` holds
        self._handles: list[Any] = []  # every hook installed
        self._module_handles: list[Any] = []  # of them, the module forward hooks (removed when recording stops)
        self._mode: RecordingMode | None = None
        # The attention calls seen by the function mode (`calls`), which is on the stack while the dispatch mode is.
        self.attention_calls: list[AttentionCall] = []
        self._call_mode = None
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
        ref = self.produced.get(id(t))
        return self.producers[id(t)] if ref is not None and ref() is t else -1

    # --- install / remove ------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop recording (the script keeps running); the report is built from what was recorded."""
        if not (self.active or self.paused):
            return
        self.paused = False
        # No attention call is made from here on: the call watch comes off first (where `_detach` would take it off),
        # so that the reads below (every parameter's `.grad` and dtype, every module's buffers: thousands in a large
        # model) do not each pass through its function mode.
        if _current_autograd_node() is None:
            self._exit_calls()
        if self.saw_backward:
            self.backward_passes += 1
            self.saw_backward = False
        self.snapshot_grads(When.END)
        for idx in range(len(self.modules)):
            self.scan_module(idx, "after")
        self.active = False
        if self.values is not None:
            self.values.flush()
        self._detach()
        if self.on_stop is not None:
            self.on_stop()

    def _detach(self, keep_autocast: bool = False) -> None:
        """The script runs on after recording stops (often for hours): take the dispatch mode off the stack and
        remove the module hooks and the autocast wrappers now, so later ops and modules pay nothing for the audit. The mode
        comes off only when it is this thread's innermost one (a mode the script entered above it is left in place,
        and ours passes its ops through until the audit exits); the recording slot is held until the audit exits."""
        # Not inside a backward node (an optimizer stepped from a post-accumulate-grad hook): autograd restores the
        # mode stack when the node ends, which would put the mode back with nothing left to take it off.
        if _current_autograd_node() is None:
            if self._mode is not None and self._mode.leave():
                self._mode = None
            self._exit_calls()
        if not keep_autocast:
            self._unpatch_autocast()
        # Module hooks go now. The optimizer hooks stay until exit: stop() runs inside torch's loop over the global
        # optimizer post-hooks, which raises "OrderedDict mutated during iteration" at the next hook if one is removed
        # (a hook registered after ours); inert once recording stopped, they cost one call per optimizer step.
        self._remove_hooks(self._module_handles)

    def _claim(self) -> None:
        claim(self)

    def _unclaim(self) -> None:
        unclaim(self)

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
        self._base_stack = mode_stack()
        self._mode = RecordingMode(self)
        self._handles = [
            optim_mod.register_optimizer_step_pre_hook(self._opt_pre),
            optim_mod.register_optimizer_step_post_hook(self._opt_post),
        ]
        try:
            self._hook_modules()
            self._patch_autocast()
            self.refresh_autocast()
            self._enter_calls()
            self._mode.enter()
        except BaseException:
            self._mode = None
            self._exit_calls()
            self._unpatch_autocast()
            self._remove_hooks()
            raise

    def release(self) -> None:
        """Drop everything that keeps the user's objects alive (after the report is built)."""
        self._alive.clear()
        self.producers.clear()
        self.produced.clear()
        self._internal.clear()
        self._lines.clear()
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
                    self._mode.exit(*exc)
            finally:
                self._mode = None
                try:
                    self._exit_calls()
                    self._unpatch_autocast()
                    self._remove_hooks()
                finally:
                    self.stack.clear()
                    self._calls.clear()
                    self._unclaim()
