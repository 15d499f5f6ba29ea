"""Module tracking for the audit: global forward hooks that keep the stack of running modules (an op's module),
the map from autograd sequence numbers to the module that ran (a backward op's module, with no trace left on the
user's graph), each module's callers and input/output dtypes, and scans of buffers and tensor attributes."""

from __future__ import annotations

import collections
import functools
import sys
import threading
import weakref
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from ampdoctor.audit.dispatch import _FLOATS, _flatten, _peek_sequence_nr, line_of
from ampdoctor.audit.evidence import BufferScan


@dataclass
class ModuleInfo:
    ref: Callable[[], Any]
    cls: str
    parent: int  # index of the module that was running when this one was first entered, -1 for none
    inputs: set = field(default_factory=set)
    outputs: set = field(default_factory=set)
    calls: int = 0
    # (code, line) of the frame that called this module first (a library's line when a library called it).
    caller: tuple | None = None
    # (code, line) of the first frame of the user's own code on that call's stack (the user's `model(...)`).
    user_call: tuple | None = None


# Types of most of a module's attributes (flags, sizes, names, the dicts of its parameters, buffers and hooks), none
# of them a tensor: passed over without an `isinstance(v, torch.Tensor)`, which goes through torch's metaclass.
_NOT_TENSORS = frozenset({bool, int, float, str, type(None), dict, collections.OrderedDict, list, tuple, set})
_NO_TORCH_FUNCTION = torch._C.DisableTorchFunction


def tensor_attributes(m: torch.nn.Module) -> list[tuple[str, Any]]:
    """The tensors a module holds as plain attributes (not in `_parameters` or `_buffers`), with their names."""
    return [(k, v) for k, v in vars(m).items() if type(v) not in _NOT_TENSORS and isinstance(v, torch.Tensor)]


# How `nn.Module` lists a module's own parameters and buffers: a class that keeps all of these lists them from its
# `_parameters` and `_buffers` dicts.
_LISTING = tuple((name, getattr(torch.nn.Module, name)) for name in ("parameters", "named_parameters", "buffers", "named_buffers",
                                                                    "_named_members"))
_LISTS_ITS_DICTS: dict[type, bool] = {}


def own_tensors(m: torch.nn.Module) -> tuple[list, list]:
    """What `m.parameters(recurse=False)` and `m.buffers(recurse=False)` give (in their order, a tensor held under two
    names once), read from the module's dicts without the generators torch lists them with, unless its class lists
    them its own way."""
    cls = type(m)
    plain = _LISTS_ITS_DICTS.get(cls)
    if plain is None:
        plain = _LISTS_ITS_DICTS[cls] = all(getattr(cls, name, None) is fn for name, fn in _LISTING)
    if not plain:
        return list(m.parameters(recurse=False)), list(m.buffers(recurse=False))
    return (list({id(t): t for t in m._parameters.values() if t is not None}.values()),
            list({id(t): t for t in m._buffers.values() if t is not None}.values()))


def _float_dtypes(tensors: list) -> set:
    """The float dtypes among `tensors`, each tensor's dtype read once, with torch function handling off: a module hook
    runs under the attention-call watch's function mode (and any the program entered), through which every read of a
    tensor attribute would otherwise pass, at the cost of a Python call each; the dtype read is the tensor's own."""
    if not tensors:
        return set()
    with _NO_TORCH_FUNCTION():
        return {dt for dt in (t.dtype for t in tensors) if dt in _FLOATS}


def _died(deaths: dict[int, int], records: list, key: int, _ref: Any) -> None:
    deaths.setdefault(key, len(records))


class ModuleTracking:
    """The module half of `Recorder`; the state it reads and writes is set up in `Recorder.__init__`."""

    def _scope_changed(self) -> None:
        self._scope_nrs.append(_peek_sequence_nr())
        self._scope_mods.append(self.stack[-1] if self.stack else -1)

    def _line(self, code: Any, lasti: int) -> int:
        """`line_of`, remembered per instruction: a model's identical layers are all called from the same few lines,
        which `line_of` finds by a walk over the line table of the whole calling function. Keyed by the code's id,
        which is its own while the frame walk's table (`_internal`) holds the code (every code `frames` gives)."""
        key = (id(code), lasti)
        line = self._lines.get(key)
        if line is None:
            line = self._lines[key] = line_of(code, lasti)
        return line

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
        for p in own_tensors(m)[0]:
            self.params.setdefault(id(p), weakref.ref(p))
        return idx

    def here(self) -> bool:
        """The caller runs under this recording: in the thread that entered it, or in a thread that carries its
        dispatch mode (autograd's device threads running a CUDA backward, with checkpointed forwards in it)."""
        return threading.get_ident() == self._thread or (self._mode is not None and self._mode.on_stack())

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
            self.scan_tree(m)
        idx = self.module_index(m)
        info = self.modules[idx]
        info.calls += 1
        # The frame that runs the hooks also calls forward.
        call = sys._getframe(1)
        code, lasti, _ = self.frames(call)
        if info.caller is None:
            info.caller = (code, self._line(code, lasti) if code is not None else 0)
            info.user_call = self.user_frame(call)
        if idx not in self._scanned:
            self._scanned.add(idx)
            self.scan_module(idx, "before")
        ins: list = []
        _flatten(args, ins)
        info.inputs.update(_float_dtypes(ins))
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
        self.modules[idx].outputs.update(_float_dtypes(outs))

    def scan_tree(self, root: torch.nn.Module) -> None:
        """Scan every module under `root` not scanned yet, at the start of a step: a module whose forward never runs
        (a LightningModule whose `training_step` computes without calling `self(...)`) still holds buffers the step
        reads. Once per root object: later steps cost one set lookup."""
        if id(root) in self._expanded:
            return
        self._expanded.add(id(root))
        for m in root.modules():
            idx = self.module_index(m)
            if idx not in self._scanned:
                self._scanned.add(idx)
                self.scan_module(idx, "before")

    def scan_module(self, idx: int, when: str) -> None:
        """Buffers and tensor attributes (the rotary caches of AMP002 live in both), for rope-cache checks."""
        m = self.modules[idx].ref()
        if m is None:
            return
        items = list(m._buffers.items()) + [(k, v) for k, v in tensor_attributes(m) if not isinstance(v, torch.nn.Parameter)]
        for name, t in items:
            if isinstance(t, torch.Tensor) and t.dtype in _FLOATS:
                prod = self.producer_of(t)  # type: ignore[attr-defined]  (the Recorder this mixes into)
                if prod >= 0:
                    self.module_scans.append(BufferScan(idx, name, t.dtype, tuple(t.shape), when, weakref.ref(t), prod))
                    continue
                # a tensor no recorded op made is known by its id, which CPython gives to another tensor once it dies:
                # when it died tells its reads (before) from the reads of that other tensor (after)
                # (the callback holds the record and the deaths, not the recorder: no cycle keeps a recorder alive)
                ref = weakref.ref(t, functools.partial(_died, self.leaf_deaths, self.records, -id(t)))  # type: ignore[attr-defined]
                self.module_scans.append(BufferScan(idx, name, t.dtype, tuple(t.shape), when, ref, -id(t)))

    def _hook_modules(self) -> None:
        """The global module forward hooks: installed on entry and again when a sample resumes."""
        import torch.nn.modules.module as module_mod

        self._module_handles = [module_mod.register_module_forward_pre_hook(self._pre_hook),
                                module_mod.register_module_forward_hook(self._post_hook, always_call=True)]
        self._handles.extend(self._module_handles)
