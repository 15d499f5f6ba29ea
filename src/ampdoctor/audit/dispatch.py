"""The hot path of the runtime audit: the private `TorchDispatchMode` that records every aten op as one compact tuple
(fields named in `fields`), and the frame walk that says which line of the user's code called the op.

`Recorder` (recorder.py) owns the state the mode writes into; this module only reads and appends to it.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import threading
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode

from ampdoctor.audit.evidence import Tag
from ampdoctor.audit.fakes import FaithfulFakeTensorMode
from ampdoctor.audit.fields import BACKWARD, FORWARD, OPTIMIZER
from ampdoctor.audit.watch import HOLD_VALUES
from ampdoctor.dtypes import FLOAT_NAMES, HALF, to_torch

# The fake modes the recording goes inside of (see `enter`): torch's, and the audit's own that only differs where a
# meta function is stricter than the kernels (`fakes`). Other subclasses may dispatch differently: a mode above them.
_FAKE_MODES = (FakeTensorMode, FaithfulFakeTensorMode)

if TYPE_CHECKING:
    from ampdoctor.audit.recorder import Recorder

_FLOATS = frozenset(to_torch(n) for n in FLOAT_NAMES)
_HALF = frozenset(to_torch(n) for n in HALF)

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_AMPDOCTOR_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_STDLIB_DIRS = tuple({os.path.abspath(p) + os.sep for p in (sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"])})
# Installed libraries: in a virtual environment `platstdlib` holds site-packages, which are not the standard library.
_LIBRARY_MARKS = (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}")
# ampdoctor's own entry points (its CLI): an op whose walk reaches them first was issued by ampdoctor on the user's
# behalf (`audit --hf-config` runs the backward), and what lies beyond (the console script) is nobody's code.
_BOUNDARY_FILES = (os.path.join(_AMPDOCTOR_DIR, "cli") + os.sep, os.path.join(_AMPDOCTOR_DIR, "__main__.py"))
AUDIT_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
# Frames between an op call and `__torch_dispatch__` that belong to the mode machinery itself.
_MODE_FILES = (AUDIT_DIR, os.path.join(_TORCH_DIR, "utils", "_python_dispatch.py"), os.path.join(_TORCH_DIR, "_dynamo"), os.path.join(_TORCH_DIR, "_compile.py"),
               # the fake mode's dispatch, when the recording sits inside it (`RecordingMode.enter`)
               os.path.join(_TORCH_DIR, "_subclasses", "fake_tensor.py"), os.path.join(_TORCH_DIR, "utils", "_stats.py"))


_ENGINE_RUN = getattr(getattr(torch.autograd, "graph", None), "_engine_run_backward", None)
_ENGINE_CODE = getattr(_ENGINE_RUN, "__code__", None)


def mode_stack() -> list:
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


def _tensor_args(args: tuple, kwargs: dict, kind: tuple) -> list:
    """An op's tensor arguments, in order: at the places its schema gives them (`_plan`, in `kind`), else (no plan,
    or a keyword the plan does not know) wherever they are among the arguments and the lists in them. A tensor's place
    can hold a number too (a wrapped scalar: `x + 1`); a type test finds most tensors before `isinstance`, which costs
    ten times more (their class has a metaclass)."""
    where = kind[2]
    if where is None or (kwargs and not kwargs.keys() <= kind[3]):
        ins: list = []
        _flatten(args, ins)
        if kwargs:
            _flatten(kwargs.values(), ins)
        return ins
    tensor_types = _TENSOR_TYPES
    if where is _FIRST:
        a = args[0] if args else None
        return [a] if type(a) in tensor_types or isinstance(a, torch.Tensor) else []
    ins = []
    n = len(args)
    for i, many in where:
        if i >= n:
            break
        a = args[i]
        if many and isinstance(a, (list, tuple)):
            ins.extend(b for b in a if type(b) in tensor_types or (b is not None and isinstance(b, torch.Tensor)))
        elif type(a) in tensor_types or (a is not None and isinstance(a, torch.Tensor)):
            ins.append(a)
    return ins


def _inputs(r: "Recorder", ins: list, seq: int) -> tuple[tuple, tuple]:
    """The dtypes of an op's tensor inputs and, for float ones, their producer's seq or minus the id of a leaf
    (parameter, buffer, input: named later); a leaf's values are measured the first time it is read."""
    in_dt = []
    in_prod = []
    for t in ins:
        dt = t.dtype
        in_dt.append(dt)
        in_prod.append(_producer(r, t, seq) if dt in _FLOATS else None)
    return tuple(in_dt), tuple(in_prod)


def _phase_and_module(r: "Recorder", values: Any, seq: int) -> tuple[str, int, Any]:
    """The phase an op runs in and the module it belongs to: the running module in forward, the module that made the
    autograd node in backward (an AccumulateGrad node has no sequence number: its parameter is noted instead)."""
    node = _current_autograd_node()
    if node is None:
        stack = r.stack
        if r.in_optimizer or (r.saw_backward and not stack):
            return OPTIMIZER, stack[-1] if stack else -1, None
        if values is not None:
            values.forward_seqs.append(seq)
            values.forward_nrs.append(_peek_sequence_nr())
        return FORWARD, stack[-1] if stack else -1, None
    r.saw_backward = True
    nr = node._sequence_nr()
    if nr == _NO_SEQUENCE_NR:
        var = getattr(node, "variable", None)
        return BACKWARD, -1, (Tag.ACCUMULATE, id(var)) if var is not None else None
    if values is not None:
        values.backward_nrs[seq] = nr
    return BACKWARD, r.module_at(nr), None


def _producer(r: "Recorder", a: Any, seq: int) -> int:
    """What an op's float input `a` is recorded as: the seq of the recorded op that made it, or for a leaf (no
    recorded op made it) minus its id, its values offered to the value watch where its type can hold some (`leaf`
    measures no other)."""
    tid = id(a)
    ref = r.produced.get(tid)
    if ref is not None and ref() is a:
        return r.producers[tid]
    if r.values is not None and type(a) in HOLD_VALUES:
        r.values.leaf(a, seq)
    return -tid


def _single_inputs(r: "Recorder", places: tuple, args: tuple, seq: int) -> tuple[list, tuple, tuple]:
    """`_tensor_args` and `_inputs` in one loop, for a plan with one tensor or none at each of its `places`."""
    ins = []
    dts = []
    prods = []
    n = len(args)
    for i in places:
        if i >= n:
            break
        a = args[i]
        if type(a) in _TENSOR_TYPES or (a is not None and isinstance(a, torch.Tensor)):
            ins.append(a)
            dt = a.dtype
            dts.append(dt)
            prods.append(_producer(r, a, seq) if dt in _FLOATS else None)
    return ins, tuple(dts), tuple(prods)


def _outputs(out: Any, r: "Recorder", seq: int) -> tuple[list, list]:
    """An op's tensor outputs and their dtypes; each float one is noted as made by op `seq`."""
    if isinstance(out, torch.Tensor):  # most ops: one tensor
        dt = out.dtype
        if dt in _FLOATS:
            r.produced[id(out)] = weakref.ref(out)
            r.producers[id(out)] = seq
        return [out], [dt]
    outs: list = []
    if isinstance(out, (list, tuple)):
        _flatten(out, outs)
    out_dt = []
    prov = r.producers
    made = r.produced
    for t in outs:
        dt = t.dtype
        out_dt.append(dt)
        if dt in _FLOATS:
            # No weakref callback: a dead entry is recognised by its dead ref, and one callback
            # per output costs more than the entries it would drop (`release` clears them).
            made[id(t)] = weakref.ref(t)
            prov[id(t)] = seq
    return outs, out_dt


# Questions about a tensor's metadata that reach Python dispatch only for tensor subclasses that keep their metadata
# in Python (fake tensors: autograd asks every differentiable op's inputs and outputs for their device, which is
# most of a fake step's dispatches). They compute nothing and return no tensor: no dtype flows through them, nothing
# they return is an input of a later op, and a real tensor answers them in C++ without dispatching, so its record
# never holds them. The recording passes them through unrecorded (FakeTensorMode answers the same ones straight from
# its metadata). By id: `OpOverload.__hash__` is Python code.
# The same for the sparse layout queries and the profiler's marker that closes a `record_function` range (an
# optimizer's step opens one), which a fake mode runs directly, before its op implementation where the recording sits.
_METADATA_QUERIES = frozenset(id(op) for op in (torch.ops.prim.device.default, torch.ops.aten.size.default, torch.ops.aten.stride.default,
                                                torch.ops.aten.storage_offset.default, torch.ops.aten.is_coalesced.default,
                                                torch.ops.aten.dense_dim.default, torch.ops.aten.sparse_dim.default,
                                                torch.ops.profiler._record_function_exit._RecordFunction))


# The types of most tensors an op reads or returns (a type test costs a tenth of `isinstance(x, torch.Tensor)`, whose
# class has a metaclass); other subclasses go through `isinstance`.
_TENSOR_TYPES = frozenset({torch.Tensor, torch.nn.Parameter, FakeTensor})
# Argument types of op schemas that never hold a tensor: an op whose every other argument is a tensor, an optional
# one or a list of them has its tensors read at those places only (`_plan`).
_NO_TENSOR = frozenset({"int", "bool", "float", "complex", "number", "str", "Device", "Generator", "Layout", "ScalarType",
                        "MemoryFormat", "Storage", "Dimname", "List[int]", "List[bool]", "List[float]", "List[complex]",
                        "List[str]", "List[number]", "List[Dimname]"})
_ONE_TENSOR = frozenset({"Tensor", "Optional[Tensor]"})
_TENSORS = frozenset({"List[Tensor]", "List[Optional[Tensor]]", "Optional[List[Tensor]]"})
_FIRST = ((0, False),)  # the commonest plan: one tensor, the first argument


def _plan(func: Any) -> tuple[Any, frozenset]:
    """Where an op's tensor arguments are: the positions of its positional tensor, optional tensor and tensor list
    arguments (`_FIRST` when that is the first argument alone), and the names of its keyword-only arguments that hold
    no tensor (a call that passes another keyword has every argument looked at); None when a positional argument's
    type could hold a tensor otherwise (every argument is then looked at: an op from a library may declare anything)."""
    schema = getattr(func, "_schema", None)
    if schema is None:
        return None, frozenset()
    where = []
    keywords = []
    for i, arg in enumerate(schema.arguments):
        kind = str(arg.type)
        if kind.startswith("Optional[") and kind[9:-1] in _NO_TENSOR:
            kind = kind[9:-1]
        if arg.kwarg_only:
            # passed in `kwargs`: one that can hold a tensor is left out of the names, so a call that passes it has
            # every argument looked at
            if kind in _NO_TENSOR:
                keywords.append(arg.name)
            continue
        if kind in _NO_TENSOR:
            continue
        if kind not in _ONE_TENSOR and kind not in _TENSORS:
            return None, frozenset()
        where.append((i, kind in _TENSORS))
    plan = tuple(where)
    return (_FIRST if plan == _FIRST else plan), frozenset(keywords)


def _fake_target(fake: Any) -> str | None:
    """The method of a fake mode that runs an op once the mode has answered metadata queries and the like itself
    (`FakeTensorMode.dispatch`), which the recording wraps; None where this torch has neither."""
    target = "_cached_dispatch_impl" if getattr(fake, "cache_enabled", False) else "_dispatch_impl"
    return target if callable(getattr(fake, target, None)) else None


def _direct(func: Any, types: Any, args: tuple, kwargs: dict) -> Any:
    """How `record` runs an op from the dispatch mode above the others (inside a fake mode: its dispatch)."""
    return func(*args, **kwargs)


@dataclass
class Failure:
    seq: int
    exc: BaseException


class RecordingMode(TorchDispatchMode):
    """Appends one record per aten op while the recorder is active; passes ops through otherwise."""

    def __init__(self, recorder: "Recorder") -> None:
        super().__init__()
        self.r = recorder
        # Per op (by id): whether its results can hold values to measure, and its watch. Looked up once per op
        # kind, not once per call.
        self._kinds: dict[int, tuple[bool, Any]] = {}
        # Records hold one shared tuple per distinct dtype list or call site: fewer objects that outlive the op,
        # so fewer garbage-collector passes during a long recording.
        self._shared: dict[tuple, tuple] = {}
        self._ones: dict[Any, tuple] = {}  # dtype -> the shared `(dtype,)` of `_shared` (`_one`)
        self.fake: Any = None  # the FakeTensorMode whose dispatch records, when recording sits there (`enter`)
        self._target = ""  # the fake mode's method the recording wraps there (`_fake_target`)
        # Whether an op's results can hold values: not when every op runs in a fake mode that takes fake inputs only
        # (its results are fake, and so are the arguments an in-place op writes), where the value watch would look
        # at every op and find nothing to measure. Inputs are still offered to it: a constant the fake mode lifts
        # is real.
        self._results_hold_values = True
        self._entry_depth = 0  # see `_find_entry`; 0 until the first op

    def _kind(self, fid: int, func: Any) -> tuple[bool, Any, Any, frozenset, tuple | None]:
        """What `record` needs to know of an op, once per op kind: whether its results can hold values to measure,
        its watch, where its tensor arguments are (`_plan`) and, when each place holds one tensor, those places."""
        r = self.r
        r.ops[fid] = func
        measured = r.values is not None and self._results_hold_values and r.values.how(fid, func) is not None
        where, keywords = _plan(func)
        # the places of a plan of single tensors only (`mm`, `add`: `record` reads them without `_tensor_args`)
        single = tuple(i for i, _ in where) if where is not None and where is not _FIRST and not any(many for _, many in where) else None
        kind = self._kinds[fid] = (measured, r.watch.get(fid), where, keywords, single)
        return kind

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not self.r.active or id(func) in _METADATA_QUERIES:
            return func(*args, **kwargs)
        return self.record(func, types, args, kwargs, _direct)

    # --- where the mode sits ----------------------------------------------------------------------
    # Under a FakeTensorMode and nothing else, the recording goes inside the fake mode's own Python dispatch (an
    # instance attribute, removed on exit) instead of in a second dispatch mode above it: each op then crosses into
    # Python once, not twice, which is about a seventh of a fake step's time. It wraps the fake mode's op
    # implementation (`_cached_dispatch_impl`, or `_dispatch_impl` where its cache is off), below where the mode
    # answers metadata queries itself: those are two thirds of a fake step's dispatches and never reach it. Ops the
    # fake mode runs while it dispatches one (decompositions, and the recorder's own reads) are not recorded, as the
    # stack would not pass them to a mode above it either.

    def enter(self) -> None:
        """Start recording: as the innermost dispatch mode, or inside the only mode on the stack when it is fake."""
        self._entry_depth = 0
        stack = mode_stack()
        fake = stack[0] if len(stack) == 1 and type(stack[0]) in _FAKE_MODES else None
        target = _fake_target(fake) if fake is not None else None
        if target is not None and target not in vars(fake):
            inner = getattr(fake, target)
            record = self.record
            r = self.r
            # The threads now inside `record` (a set of thread ids: cheaper per op than a `threading.local`).
            busy: set[int] = set()
            get_ident = threading.get_ident

            def dispatch(func, types, args, kwargs):
                if not r.active:
                    return inner(func, types, args, kwargs)
                me = get_ident()
                if me in busy:
                    return inner(func, types, args, kwargs)
                busy.add(me)
                try:
                    return record(func, types, args, kwargs or {}, inner)
                finally:
                    busy.discard(me)

            setattr(fake, target, dispatch)
            self.fake = fake
            self._target = target
            self._results_hold_values = bool(fake.allow_non_fake_inputs)
        else:
            self.__enter__()

    def leave(self) -> bool:
        """Stop passing ops through the recorder where that can be undone here: only when no mode the script entered
        sits above it (then it stays in place, passing ops through, as `enter` could not put it back under that
        mode); inside a fake mode, when no other mode is on the stack. Whether it did."""
        if self.fake is not None:
            if any(m is not self.fake for m in mode_stack()):
                return False
            self._unpatch()
            return True
        if mode_stack()[-1:] == [self]:
            self.__exit__(None, None, None)
            return True
        return False

    def exit(self, *exc: Any) -> None:
        """Take the recording off whatever is above it (the audit's exit)."""
        if self.fake is not None:
            self._unpatch()
        else:
            self.__exit__(*exc)

    def _unpatch(self) -> None:
        delattr(self.fake, self._target)
        self.fake = None

    def on_stack(self) -> bool:
        """The calling thread's ops pass through this recording."""
        if self.fake is not None:
            return torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE) is self.fake
        return self in mode_stack()

    def _find_entry(self) -> int:
        """How many frames `record` runs under the Python entry of the mode it records in (`__torch_dispatch__` and
        its decorators, and the fake mode's dispatch): the depth of that entry's caller, where each op's frame walk
        may start when every frame up to the entry is mode machinery, which the walk passes (1 otherwise: record's
        caller). The same for every op recorded in this placement (`enter` forgets it); learnt at the first one."""
        owner = self.fake if self.fake is not None else self
        entry = getattr(type(owner).__torch_dispatch__, "__code__", None)
        r = self.r
        f = sys._getframe(2)  # record's caller
        depth = 1
        while f is not None and (r._internal.get(id(f.f_code)) or r._classify(f.f_code))[0]:
            if f.f_code is entry:
                self._entry_depth = depth + 1
                return self._entry_depth
            f = f.f_back
            depth += 1
        self._entry_depth = 1
        return 1

    def _one(self, dt: Any) -> tuple:
        """The shared one-dtype tuple `(dt,)` (the dtypes of most ops' inputs and outputs), found by its dtype: no tuple
        is made and hashed per op to find it among `_shared`, whose entry it is."""
        t = (dt,)
        t = self._ones[dt] = self._shared.setdefault(t, t)
        return t

    def _read_inputs(self, kind: tuple, args: tuple, kwargs: dict, seq: int) -> tuple[Any, tuple, tuple]:
        """An op's tensor inputs, their dtypes (a tuple `_shared` holds) and producers. The commonest op reads one
        tensor, its first argument (`_FIRST`), and an op with one tensor or none at each place (`mm`, `add`) is read
        in one loop: neither builds the lists `_tensor_args` and `_inputs` do."""
        if kind[2] is _FIRST and (not kwargs or kwargs.keys() <= kind[3]):
            a = args[0] if args else None
            if type(a) in _TENSOR_TYPES or isinstance(a, torch.Tensor):
                dt = a.dtype
                in_dt = self._ones.get(dt) or self._one(dt)
                return (a,), in_dt, (_producer(self.r, a, seq) if dt in _FLOATS else None,)
            return (), (), ()
        if kind[4] is not None and (not kwargs or kwargs.keys() <= kind[3]):
            ins, in_dt, in_prod = _single_inputs(self.r, kind[4], args, seq)
        else:
            ins = _tensor_args(args, kwargs, kind)
            in_dt, in_prod = _inputs(self.r, ins, seq)
        return ins, self._shared.setdefault(in_dt, in_dt), in_prod

    def record(self, func, types, args, kwargs, through):
        """Run the op through `through` (the fake mode's dispatch, or `_direct`) and append its record."""
        r = self.r
        records = r.records
        seq = len(records)
        values = r.values
        fid = id(func)
        kind = self._kinds.get(fid) or self._kind(fid, func)
        ins, in_dt, in_prod = self._read_inputs(kind, args, kwargs, seq)
        phase, mod, extra = _phase_and_module(r, values, seq)
        shared = self._shared
        # The walks start above the mode's own entry, reached in one jump: `sys._getframe` makes a frame object for
        # the frame it returns only, a walk one for every frame it passes (the fake mode's entry is five deep).
        try:
            caller = sys._getframe(self._entry_depth or self._find_entry())
        except ValueError:  # no frame above the entry (an autograd device thread): the walks pass the machinery
            caller = None
        if phase is BACKWARD and values is not None and ((caller is not None and caller.f_code is _ENGINE_CODE) or r.engine_issued(caller)):
            # An op the autograd engine runs has only the `.backward()` call on its Python stack: the report places
            # it at the forward line that built its node (`Trace.location`, through the value watch's sequence
            # numbers). Ops of Python run inside backward (hooks, a Function's backward) keep their own line.
            code, lasti, inner = None, 0, None
        else:
            code, lasti, inner = r.frames(caller)
            if inner is not None:
                inner = shared.setdefault(inner, inner)
        autocast = r.autocast_on
        try:
            out = through(func, types, args, kwargs)
        except Exception as exc:
            records.append((seq, fid, in_dt, in_prod, None, mod, phase, code, lasti, inner, autocast, extra))
            r.failure = Failure(seq, exc)
            raise
        if type(out) in _TENSOR_TYPES:  # most ops: one tensor, of a common type
            dt = out.dtype
            if dt in _FLOATS:
                tid = id(out)
                r.produced[tid] = weakref.ref(out)
                r.producers[tid] = seq
            out_t = self._ones.get(dt) or self._one(dt)
            if kind[0]:
                values.output(seq, fid, func, args, kwargs, [out], phase is OPTIMIZER)
        else:
            outs, out_dt = _outputs(out, r, seq)
            out_t = tuple(out_dt)
            out_t = shared.setdefault(out_t, out_t)
            if kind[0] and (out_t or out is None):
                values.output(seq, fid, func, args, kwargs, outs, phase is OPTIMIZER)
        if kind[1] is not None and extra is None:  # an AccumulateGrad add_ keeps its ACCUMULATE tag
            extra = kind[1](r, func, args, kwargs, out, ins)
        records.append((seq, fid, in_dt, in_prod, out_t, mod, phase, code, lasti, inner, autocast, extra))
        return out


def is_library_path(path: str) -> bool:
    """A file of an installed library (under site-packages or dist-packages), not the user's own code."""
    return any(mark in path for mark in _LIBRARY_MARKS)


def library_name(path: str) -> str | None:
    """The top-level package of an installed library's file (`transformers` for .../site-packages/transformers/...)."""
    for mark in _LIBRARY_MARKS:
        _, found, rest = path.rpartition(mark)
        if found:
            top = rest.split(os.sep, 1)[0]
            return top[:-3] if top.endswith(".py") else top
    return None


class FrameWalk:
    """Which line called an op: the first frame outside torch, ampdoctor and the standard library (a line of an
    installed library when the library made the call, else the user's), with the frames of the module running now
    reused (its forward's caller is on the stack for as long as it runs)."""

    # id(code) -> (mode machinery?, internal?, code, library?, boundary?)
    _internal: dict[int, tuple[bool, bool, Any, bool, bool]]
    _calls: list[tuple[Any, Any, int]]

    def _classify(self, code: Any) -> tuple[bool, bool, Any, bool, bool]:
        name = code.co_filename
        path = os.path.abspath(name) if not name.startswith("<") else name
        mode = path.startswith(_MODE_FILES)
        library = is_library_path(path) and not path.startswith((_TORCH_DIR, _AMPDOCTOR_DIR))
        boundary = path.startswith(_BOUNDARY_FILES)
        internal = mode or boundary or (not library and (path.startswith((_TORCH_DIR, _AMPDOCTOR_DIR)) or path.startswith(_STDLIB_DIRS)
                                                         or name.startswith("<frozen")))
        out = (mode, internal, code, library, boundary)
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
            if kind[4]:
                return None, 0, inner
            f = f.f_back
        return None, 0, inner

    def engine_issued(self, f: Any = None) -> bool:
        """The op was called by the autograd engine itself: no Python frame but the mode's own between the op and the
        engine's entry (or none at all, in an engine device thread). Walks from `f`, by default the caller of the
        caller."""
        if f is None:
            f = sys._getframe(2)
        cache = self._internal
        while f is not None:
            c = f.f_code
            if c is _ENGINE_CODE:
                return True
            if not (cache.get(id(c)) or self._classify(c))[0]:
                return False
            f = f.f_back
        return True

    def user_frame(self, f: Any = None) -> tuple[Any, int]:
        """(code, line) of the first frame of the user's own code above the caller (installed libraries skipped:
        the Trainer's `optimizer.step()` is the user's `trainer.train()`), (None, 0) when there is none."""
        f = sys._getframe(1) if f is None else f
        cache = self._internal
        while f is not None:
            c = f.f_code
            kind = cache.get(id(c)) or self._classify(c)
            if kind[4]:
                break
            if not kind[1] and not kind[3]:
                return c, f.f_lineno
            f = f.f_back
        return None, 0
