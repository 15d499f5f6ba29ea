"""Names and provenance over a finished recording: module paths as in `named_modules()`, leaf
tensors named as parameters/buffers, and the walks from a failing op back to where a dtype first
left the policy."""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import deque
from itertools import compress, repeat
from operator import eq, itemgetter
from typing import Any, Callable, Collection, Iterable, Iterator

import torch

from ampdoctor import dtypes
from ampdoctor.audit.calls import AttentionCall
from ampdoctor.audit.evidence import BufferScan, GradSnapshot, Op, OptimizerStep, Tag
from ampdoctor.audit.fields import BACKWARD, CODE, EXTRA, FUNC, IN_DT, IN_PROD, LASTI, MOD, OUT_DT, PHASE
from ampdoctor.audit.modules import tensor_attributes
from ampdoctor.audit.names import module_label, op_name, relpath
from ampdoctor.audit.recorder import Recorder, line_of
from ampdoctor.core import Location
from ampdoctor.dtypes import name_of as dtype_name

HALF = tuple(dtypes.to_torch(n) for n in dtypes.HALF)
FLOATS = tuple(dtypes.to_torch(n) for n in dtypes.FLOAT_NAMES)
_TRIG = {"aten::cos", "aten::sin"}
TABLE_NAME = dtypes.ROPE_TABLE_NAME
# Ops that carry a tensor's role through unchanged (a view or a copy of a cos table is still one).
_CARRY = {
    "aten::view", "aten::_unsafe_view", "aten::reshape", "aten::slice", "aten::select", "aten::unsqueeze", "aten::squeeze",
    "aten::expand", "aten::cat", "aten::stack", "aten::index", "aten::_to_copy", "aten::clone", "aten::t", "aten::transpose",
    "aten::permute", "aten::repeat", "aten::contiguous", "aten::alias", "aten::detach", "aten::lift_fresh", "aten::split",
    "aten::split_with_sizes", "aten::chunk", "aten::narrow", "aten::embedding", "aten::index_select", "aten::repeat_interleave",
}


# Added to minus an id, it makes the key of another tensor under a dead tensor's id: still negative (a leaf), and
# no id reaches it.
_REUSED = -(1 << 62)

_VIEWS = {
    "aten::view", "aten::_unsafe_view", "aten::reshape", "aten::slice", "aten::select", "aten::unsqueeze", "aten::squeeze",
    "aten::expand", "aten::t", "aten::transpose", "aten::permute", "aten::alias", "aten::detach", "aten::clone",
    "aten::contiguous", "aten::narrow", "aten::unbind", "aten::split", "aten::chunk", "aten::lift_fresh",
}


class Trace:
    """A finished recording with names resolved; all analyses read it."""

    def __init__(self, rec: Recorder, model: torch.nn.Module | None = None) -> None:
        self.rec = rec
        self.records = rec.records
        self.modules = [info.ref() for info in rec.modules]
        self.names = self._module_names(model)
        self._split_reused_ids()
        held = self._leaf_names()
        replaced_leaves, replaced_seqs = self._replaced_names()
        # A held tensor under the id of a scanned buffer that died is a newer tensor: its reads carry the key set
        # apart from the dead buffer's (`leaf_key`), and the dead buffer's name stays with the reads made before.
        # (Another tensor no recorded op made, alive under that id only between the death and the held tensor's
        # birth, would share the held tensor's name: the record cannot tell the two apart by id.)
        self.leaf_names = {**replaced_leaves, **{-self._key_of_id(tid): name for tid, name in held.items()}}
        # Buffers/parameters made by an op inside the audit (when the whole script is audited, the
        # model's `.to(bf16)` is recorded too): their producing op -> their name. Only the tensors the modules hold:
        # a live tensor under the id of a replaced buffer that died is a new tensor that was given its id.
        self.named_seq: dict[int, str] = {}
        for tid, name in held.items():
            ref = rec.produced.get(tid)
            if ref is not None and ref() is not None:
                self.named_seq[rec.producers[tid]] = name
        for seq, name in replaced_seqs.items():
            self.named_seq.setdefault(seq, name)
        self._trig: dict[int, bool] = {}
        self._kinds_in: dict[tuple, int] = {}  # `dtype_kinds`: records share their dtype tuples, so few keys
        self._op_names: dict[int, str] = {}  # op id (a record's FUNC) -> name
        self._recorded: frozenset[str] | None = None  # `recorded()`
        self._views: dict[str | None, list[Op]] = {}  # `ops()`: all, and by phase
        self._by_phase: dict[str, list[tuple]] | None = None  # `_phase_records()`
        self._funcs: dict[str | None, list[int]] = {}  # `ops_of()`: the op ids of each phase's records, in order
        self._mixed: dict[str | None, list[Op]] | None = None  # `mixed()`: all, and by phase
        self._by_tag: dict[Tag, list[Op]] | None = None  # `tagged()`
        self._call_starts: list[int] | None = None  # `attention_call_of()`
        self._fwd_seqs: list[int] = rec.values.forward_seqs if rec.values is not None else []
        self._fwd_nrs: list[int] = rec.values.forward_nrs if rec.values is not None else []
        for seq, name in list(self.named_seq.items()):
            self._name_in_place_chain(seq, name)

    # --- typed views: what runtime rules read (they never touch the recorder) -----------------------

    def ops(self, phase: str | None = None) -> Iterator[Op]:
        """Every recorded op, in order, as a named view; only those of one phase (fields.FORWARD, ...) if given."""
        views = self._views.get(phase)
        if views is None:
            # Made once per phase asked (the recording has ended): some rules walk them several times. The rules that
            # read a few kinds of op (`ops_of`, `mixed`, `tagged`) get views of those alone.
            views = self._views[phase] = list(map(Op, self._phase_records(phase)))
        return iter(views)

    def _phase_records(self, phase: str | None) -> list[tuple]:
        """The records of one phase (every record for None), in order: each phase's picked in C."""
        if phase is None:
            return self.records
        if self._by_phase is None:
            phases = list(map(itemgetter(PHASE), self.records))
            self._by_phase = {each: list(compress(self.records, map(eq, phases, repeat(each)))) for each in set(phases)}
        return self._by_phase.get(phase, [])

    def ops_of(self, fids: Collection[int], phase: str | None = None) -> Iterator[Op]:
        """The ops (of one phase, if given) whose op is one of `fids` (ids of OpOverloads, as a record's FUNC), in order:
        a rule about a few kinds of op reads those, not every op (the selection runs in C, over each phase's op ids)."""
        if not fids:
            return iter(())
        records = self._phase_records(phase)
        funcs = self._funcs.get(phase)
        if funcs is None:
            funcs = self._funcs[phase] = list(map(itemgetter(FUNC), records))
        return map(Op, compress(records, map(fids.__contains__, funcs)))

    def ops_named(self, names: Collection[str] | Callable[[str], bool], phase: str | None = None) -> Iterator[Op]:
        """`ops_of` the ops whose name (`op`) is in `names`, or satisfies `names` when it is a predicate."""
        return self.ops_of(self.fids_named(names), phase)

    def fids_named(self, names: Collection[str] | Callable[[str], bool]) -> set[int]:
        """The ids of the recorded ops (a record's FUNC) whose name (`op`) is in `names`, or satisfies `names`."""
        match = names if callable(names) else names.__contains__
        return {fid for fid in self.rec.ops if match(self._op_name(fid))}

    def mixed(self, phase: str | None = None) -> Iterator[Op]:
        """The ops whose inputs have two dtypes or more (`dtype_kinds`), in order; only those of one phase if given:
        the only ops whose float inputs can mix, walked by the rules that look for mixed inputs (a few of all)."""
        mixed = self._mixed
        if mixed is None:
            # records share their dtype tuples: each distinct one is counted once, each op looked up by its tuple
            in_dts = list(map(itemgetter(IN_DT), self.records))
            many = {in_dt for in_dt in set(in_dts) if self._kinds(in_dt) > 1}
            mixed = self._mixed = {None: list(map(Op, compress(self.records, map(many.__contains__, in_dts))))}
            for op in mixed[None]:
                mixed.setdefault(op.record[PHASE], []).append(op)
        return iter(mixed.get(phase, ()))

    def recorded(self) -> frozenset[str]:
        """The names of the ops recorded (each kind once): a rule about one kind of op asks before walking the trace."""
        if self._recorded is None:
            self._recorded = frozenset(op_name(func) for func in self.rec.ops.values())
        return self._recorded

    def op_at(self, seq: int) -> Op:
        return Op(self.records[seq])

    def tagged(self, tag: Tag) -> Iterator[Op]:
        """The ops whose record carries evidence `tag` (angles of a rotary table, positions cast to a float...)."""
        if self._by_tag is None:  # one pass for all tags: rules ask for one each, and few of ~10^5 ops carry any
            self._by_tag = {}
            for r in compress(self.records, map(itemgetter(EXTRA), self.records)):  # those with evidence
                if isinstance(r[EXTRA][0], Tag):
                    self._by_tag.setdefault(r[EXTRA][0], []).append(Op(r))
        return iter(self._by_tag.get(tag, ()))

    def tallied(self, tag: Tag) -> list[tuple[int, int, int]]:
        """For a tag whose evidence is ``(tag, lost, considered)`` (updates rounded away, of those sampled): per line of
        code, the first op there and the sums over all its ops, in the order the lines first ran."""
        by_place: dict[tuple, list[int]] = {}
        for op in self.tagged(tag):
            _, lost, considered = op.extra
            where = self.location(op.seq)
            entry = by_place.setdefault((where.file, where.line), [op.seq, 0, 0])
            entry[1] += lost
            entry[2] += considered
        return [(seq, lost, considered) for seq, lost, considered in by_place.values()]

    @property
    def optimizer_steps(self) -> list[OptimizerStep]:
        return self.rec.opt_events

    @property
    def grad_snapshots(self) -> list[GradSnapshot]:
        return self.rec.grad_events

    @property
    def buffer_scans(self) -> list[BufferScan]:
        return self.rec.module_scans

    @property
    def attention_calls(self) -> list[AttentionCall]:
        """The calls to `F.scaled_dot_product_attention`, in order, with their operands' dtypes (`calls`)."""
        return self.rec.attention_calls

    def attention_call_of(self, seq: int) -> AttentionCall | None:
        """The attention call op `seq` is part of: one it made, or for a backward op, one that made its node (its
        kernel's gradient). Its ops are the kernel's own, whatever their dtypes."""
        calls = self.rec.attention_calls
        if not calls:
            return None
        if self.records[seq][PHASE] == BACKWARD:
            fwd = self.forward_of(seq)
            if fwd is None:
                return None
            seq = fwd
        if self._call_starts is None:
            self._call_starts = [c.start for c in calls]
        i = bisect_right(self._call_starts, seq) - 1
        return calls[i] if i >= 0 and seq < calls[i].end else None

    def parameters(self) -> list[Any]:
        """The parameters seen (of modules entered and optimizers stepped) that are still alive."""
        return self.rec.param_objects()

    # --- names -----------------------------------------------------------------------------------

    def _roots(self, model: torch.nn.Module | None) -> list[torch.nn.Module]:
        """The modules seen that no other seen module contains: the model given first, else the largest first."""
        children: set[int] = set()
        for m in self.modules:
            if m is not None:
                children.update(id(c) for c in m.children())
        # A torch.compile wrapper (OptimizedModule) names its model `_orig_mod`: paths are the model's own, so the
        # wrapped model is the root and the wrapper gets a name of its own (`<OptimizedModule>`).
        roots = [_unwrapped(m) for m in self.modules if m is not None and id(m) not in children]
        roots = list({id(m): m for m in roots}.values())
        if model is not None:
            model = _unwrapped(model)
            return [model] + [m for m in roots if m is not model]
        return sorted(roots, key=lambda m: -sum(p.numel() for p in m.parameters()))

    def _module_names(self, model: torch.nn.Module | None) -> list[str | None]:
        index = {id(m): i for i, m in enumerate(self.modules) if m is not None}
        roots = self._roots(model)
        names: list[str | None] = [None] * len(self.modules)
        self.roots: list[tuple[str, torch.nn.Module]] = []
        # Every (full name, module) under the roots, as `named_modules` lists them: walked once, read again by
        # `_leaf_names` (the walk is a Python generator per module).
        self._walked: list[tuple[str, torch.nn.Module]] = []
        for k, root in enumerate(roots):
            prefix = "" if k == 0 else f"<{type(root).__name__}>"
            self.roots.append((prefix, root))
            for name, sub in root.named_modules(remove_duplicate=False):
                full = f"{prefix}.{name}" if prefix and name else prefix or name
                self._walked.append((full, sub))
                i = index.get(id(sub))
                if i is not None and names[i] is None:
                    names[i] = full
        for i, name in enumerate(names):
            if name is None:
                info = self.rec.modules[i]
                parent = names[info.parent] if info.parent >= 0 else None
                names[i] = f"{parent}.<{info.cls}>" if parent else f"<{info.cls}>"
        return names

    def _leaf_names(self) -> dict[int, str]:
        out: dict[int, str] = {}
        for full, m in self._walked:
            tensors = list(m._parameters.items()) + list(m._buffers.items())
            tensors += tensor_attributes(m)
            for k, t in tensors:
                if t is not None:
                    out.setdefault(id(t), f"{full}.{k}" if full else k)
        return out

    def _replaced_names(self) -> tuple[dict[int, str], dict[int, str]]:
        """A buffer the step replaced (`self.table = self.table.to(x.dtype)`) is no longer in its module after the
        step, but the ops read it as the record knew it when the step began: it is still the model's named tensor.
        (its leaf id -> its name, for one no recorded op made; its producing op -> its name, for one a recorded op
        made, such as the model's `.to(bf16)` in an audited script)."""
        leaves: dict[int, str] = {}
        seqs: dict[int, str] = {}
        for scan in self.rec.module_scans:
            if scan.when == "before" and scan.prod is not None:
                into, key = (seqs, scan.prod) if scan.prod >= 0 else (leaves, -scan.prod)
                into.setdefault(key, self._scan_name(scan))
        return leaves, seqs

    def _name_in_place_chain(self, seq: int, name: str) -> None:
        """A tensor's record names the op that made it last; an op that changed a named tensor in place (its
        initialisation, an optimizer's update, in an audited script) made that same tensor, which is its first input:
        reads of the tensor between those ops are reads of the named tensor too."""
        for _ in range(len(self.records)):
            if not self.op(seq).endswith("_"):
                return
            ins = self.float_inputs(seq)
            if not ins or ins[0][1] < 0:
                return
            seq = ins[0][1]
            self.named_seq.setdefault(seq, name)

    def _split_reused_ids(self) -> None:
        """A scanned tensor that died (a buffer the step replaced) gave its id to whatever tensor CPython made next:
        the reads of that id after the death are of another tensor, so they get a key of their own (`leaf_key`)."""
        deaths = self.rec.leaf_deaths
        if not deaths:
            return
        records = self.records
        for i in range(min(deaths.values()), len(records)):
            r = records[i]
            prods = tuple(_REUSED + p if p is not None and p < 0 and deaths.get(p, i + 1) <= i else p for p in r[IN_PROD])
            if prods != r[IN_PROD]:
                records[i] = (*r[:IN_PROD], prods, *r[IN_PROD + 1:])

    def key_of(self, t: Any) -> int:
        """How the record knows a live tensor: the op that made it, or its leaf key where no recorded op did."""
        prod = self.rec.producer_of(t)
        return prod if prod >= 0 else self.leaf_key(t)

    def leaf_key(self, t: Any) -> int:
        """How the record knows a live tensor that no recorded op made: minus its id, set apart (as
        `_split_reused_ids` does) when that id was a dead buffer's."""
        return self._key_of_id(id(t))

    def _key_of_id(self, tid: int) -> int:
        key = -tid
        return _REUSED + key if key in self.rec.leaf_deaths else key

    def _scan_name(self, scan: BufferScan) -> str:
        owner = self.names[scan.module] if 0 <= scan.module < len(self.names) else None
        return f"{owner}.{scan.name}" if owner else scan.name

    def module(self, idx: int) -> str | None:
        return self.names[idx] if idx is not None and idx >= 0 else None

    def param_name(self, pid: int) -> str:
        """The name of a live parameter, by its id."""
        return self.leaf_names.get(-self._key_of_id(pid), f"<parameter {pid:#x}>")

    # --- records ---------------------------------------------------------------------------------

    def op(self, seq: int) -> str:
        return self._op_name(self.records[seq][FUNC])

    def _op_name(self, fid: int) -> str:
        name = self._op_names.get(fid)
        if name is None:
            name = self._op_names[fid] = op_name(self.rec.ops[fid])
        return name

    def line(self, seq: int) -> int:
        """The user line that ran op `seq` (0 when no user frame was found)."""
        r = self.records[seq]
        return line_of(r[CODE], r[LASTI]) if r[CODE] is not None else 0

    def forward_of(self, seq: int) -> int | None:
        """For a backward op: the forward op whose autograd node it runs (the line detect_anomaly would print)."""
        watch = self.rec.values
        nr = watch.backward_nrs.get(seq) if watch is not None else None
        if nr is None:
            return None
        # Autograd numbers an op's node before the op reaches the dispatch mode, so inside the mode the counter
        # already reads one past it: the op that made node `nr` is the first whose reading is above `nr`.
        i = bisect_right(self._fwd_nrs, nr)
        return self._fwd_seqs[i] if i < len(self._fwd_seqs) else None

    def location(self, seq: int, label: str | None = None) -> Location:
        """Where op `seq` ran: the line that called it (an installed library's line when the library did), a backward
        op at the forward line that built its node (the Python stack of a backward op is only the `.backward()` call)."""
        r = self.records[seq]
        at = seq
        if r[PHASE] == BACKWARD:
            fwd = self.forward_of(seq)
            if fwd is not None and self.records[fwd][CODE] is not None:
                at = fwd
        code = self.records[at][CODE]
        return Location(
            file=relpath(code.co_filename) if code is not None else None,
            line=self.line(at) or None,
            module=self.module(r[MOD]),
            op=self.op(seq),
            phase=r[PHASE],
            label=label,
        )

    def user_call(self, module: str | None) -> Location | None:
        """The line of the user's own code that called into module `module` (by name), where it was found."""
        if module is None or module not in self.names:
            return None
        code, line = self.rec.modules[self.names.index(module)].user_call or (None, 0)
        if code is None:
            return None
        return Location(file=relpath(code.co_filename), line=line or None, label="called from your code here")

    def leaf_location(self, leaf_id: int, dtype: Any) -> Location:
        name = self.leaf_names.get(leaf_id)
        if name is None:
            return Location(label=f"a {dtype_name(dtype)} tensor made outside the audit (input or constant)")
        module, _, attr = name.rpartition(".")
        return Location(module=module, label=f"{attr} ({dtype_name(dtype)})")

    def source(self, prod: int, depth: int = 16) -> int:
        """Skip views, slices and same-role copies back to the op that computed the values
        (`cos_cached[:, :s]` was made by `aten::cos`, not by the slice)."""
        while prod >= 0 and depth > 0 and self.op(prod) in _VIEWS:
            ins = self.float_inputs(prod)
            if len(ins) != 1 or ins[0][1] < 0 or ins[0][0] != self.out_dtype(prod):
                break
            prod = ins[0][1]
            depth -= 1
        return prod

    def named_of(self, prod: int) -> tuple[str, int | None] | None:
        """(the name, minus the leaf id or None) of the parameter, buffer or tensor attribute whose values this tensor
        is, through views and slices of it (`buf[:, :n].t()`); a named tensor made by a recorded op (the model's
        `.to(bf16)` in an audited script) has no leaf id. None when an op computed the values."""
        prod = self.source(prod)
        if prod >= 0 and prod not in self.named_seq and self.op(prod) in _VIEWS:
            ins = self.float_inputs(prod)
            prod = ins[0][1] if len(ins) == 1 and ins[0][0] == self.out_dtype(prod) else prod
        if prod >= 0:
            return (self.named_seq[prod], None) if prod in self.named_seq else None
        return (self.leaf_names[-prod], prod) if -prod in self.leaf_names else None

    def describe(self, prod: int, dtype: Any) -> str:
        """`aten::cos in blocks.0.attn.pos_enc` or `buffer blocks.0.attn.rotary.inv_freq`."""
        prod = self.source(prod)
        if prod in self.named_seq:
            return f"{self.named_seq[prod]} ({dtype_name(dtype)})"
        if prod >= 0:
            mod = self.module(self.records[prod][MOD])
            return f"{self.op(prod)} in {module_label(mod)}"
        name = self.leaf_names.get(-prod)
        return f"{name} ({dtype_name(dtype)})" if name else f"a {dtype_name(dtype)} tensor from outside the audit"

    def float_inputs(self, seq: int) -> list[tuple[Any, int]]:
        r = self.records[seq]
        return [(d, p) for d, p in zip(r[IN_DT], r[IN_PROD]) if p is not None]

    def out_dtype(self, seq: int) -> Any:
        out = self.records[seq][OUT_DT]
        return out[0] if out else None

    def from_outside(self, prods: Iterable[int], dtype: Any, limit: int = 20000) -> bool:
        """Do the `dtype` values of these operands come from outside the model: followed back through their
        `dtype` inputs (a promotion with a weight keeps the activation's dtype), some path ends at an input the
        step was given (or a tensor made outside any module), and none at a named tensor (a parameter, buffer or
        attribute: a promotion by it) or at a cast to `dtype` inside the model? (A constant the model makes in
        the dtype of what it gets, `torch.tensor(scale, dtype=x.dtype)`, decides nothing.)"""
        outside = False
        for s, visit in _walk_back(prods, limit):
            if self._kept_named(s):
                return False
            ins = [(d, p) for d, p in self.float_inputs(s) if d == dtype]
            inside = self.records[s][MOD] is not None and self.records[s][MOD] >= 0
            if self.op(s) == "aten::_to_copy" and self.float_inputs(s) and self.float_inputs(s)[0][0] != dtype:
                if inside and not self._named(self.source(self.float_inputs(s)[0][1])):
                    return False  # the model cast an activation to this dtype itself (a weight upcast decides nothing)
                outside = outside or not inside
                continue
            if not ins:
                outside = outside or not inside
                continue
            for _, p in ins:
                if p >= 0:
                    visit(p)
                elif -p in self.leaf_names:
                    return False
                else:
                    outside = True
        for p in prods:
            if p < 0:
                if -p in self.leaf_names:
                    return False
                outside = True
        return outside

    def _kept_named(self, seq: int) -> bool:
        """Is `seq` a named tensor the model keeps in its dtype? Not when the step made it by casting a named tensor
        and stored it back (`self.table = self.table.to(x.dtype)`): that is the model's tensor following another
        dtype, as a cast that is not stored back would be."""
        if seq not in self.named_seq:
            return False
        ins = self.float_inputs(seq)
        return not (self.op(seq) == "aten::_to_copy" and ins and self._named(self.source(ins[0][1])))

    def _named(self, prod: int) -> bool:
        """Is this a parameter, buffer or tensor attribute of a module?"""
        return (-prod in self.leaf_names) if prod < 0 else prod in self.named_seq

    def computed_from_named(self, prod: int, limit: int = 32) -> bool:
        """Are `prod`'s values computed from the model's tensors alone, within `limit` ops: a weight a parametrization
        makes of its parts (weight norm), a merged adapter? Every path back ends at a parameter, buffer or tensor
        attribute, or at a constant a module made (an op with no float input), and no op on the way reads an index
        tensor (an embedding lookup turns the model's tensors into an activation)."""
        queue, seen, named = [prod], set(), False
        while queue:
            p = queue.pop()
            if p < 0 or p in self.named_seq:
                if not self._named(p):
                    return False  # a tensor from outside the model (an input, the advantages)
                named = True
                continue
            if p in seen:
                continue
            seen.add(p)
            ins = self.float_inputs(p)
            mod = self.records[p][MOD]
            if len(seen) > limit or len(ins) != len(self.records[p][IN_DT]) or (not ins and (mod is None or mod < 0)):
                return False  # too far to tell, an index read, or a tensor made outside any module
            queue.extend(q for _, q in ins)
        return named

    def half_copy_of(self, prod: int, depth: int = 16) -> tuple[int, str] | None:
        """(the cast, the tensor's name) when `prod` holds a named tensor's values (a parameter, buffer or tensor
        attribute of a module) cast to half on the way, through views, slices, indexing and copies that each have
        that one float input (`cache[pos][..., :d].to(q.dtype)` holds `cache`)."""
        found = self.carried_from(prod, depth)
        return found if found is not None and found[0] is not None else None

    def carried_from(self, prod: int, depth: int = 16) -> tuple[int | None, str] | None:
        """(the last cast to half on the way or None, the tensor's name) when `prod` holds a named tensor's values,
        cast or not (a layer's weight as autocast hands it to the matmul), as `half_copy_of` follows them."""
        cast = None
        while depth > 0:
            name = self.leaf_names.get(-prod) if prod < 0 else self.named_seq.get(prod)
            if name is not None:
                return cast, name
            if prod < 0 or self.op(prod) not in _CARRY:
                return None
            ins = self.float_inputs(prod)
            if len(ins) != 1:
                return None
            if self.op(prod) == "aten::_to_copy" and self.out_dtype(prod) in HALF and ins[0][0] not in HALF:
                cast = prod
            prod = ins[0][1]
            depth -= 1
        return None

    def dtype_kinds(self, seq: int) -> int:
        """How many dtypes the inputs of op `seq` have, float or not: below 2, its float inputs cannot mix. Rules that
        look for mixed inputs ask this first, so that the ~10^5 ops whose inputs share one dtype cost a lookup."""
        return self._kinds(self.records[seq][IN_DT])

    def _kinds(self, in_dt: tuple) -> int:
        n = self._kinds_in.get(in_dt)
        if n is None:
            n = self._kinds_in[in_dt] = len(set(in_dt))
        return n

    def is_promotion(self, seq: int) -> bool:
        """Mixed float inputs with an output wider than a half-precision input."""
        if self.dtype_kinds(seq) < 2:
            return False
        ins = self.float_inputs(seq)
        dts = {d for d, _ in ins}
        out = self.out_dtype(seq)
        return len(dts) > 1 and any(d in HALF for d in dts) and out in (torch.float32, torch.float64) and out in dts

    def is_trig(self, prod: int, depth: int = 12) -> bool:
        """Is this tensor (a producer seq, or minus a leaf id) a cos/sin table or a view/copy of one?"""
        if prod < 0:
            name = self.leaf_names.get(-prod, "")
            return bool(re.search(r"(^|[._])(cos|sin)", name.rpartition(".")[2] or name))
        cached = self._trig.get(prod)
        if cached is not None:
            return cached
        name = self.op(prod)
        result = False
        if name in _TRIG:
            result = True
        elif depth > 0 and (name in _CARRY or len(self.float_inputs(prod)) == 1):
            ins = self.float_inputs(prod)
            result = bool(ins) and all(self.is_trig(p, depth - 1) for _, p in ins[:1])
        self._trig[prod] = result
        return result

    def integer_valued(self, prod: int, depth: int = 16) -> bool:
        """Does this float tensor hold integers the step made (positions: an `arange`, or a cast of an integer
        tensor such as `position_ids.float()`), followed back through views, copies and casts?"""
        while prod >= 0 and depth > 0:
            name = self.op(prod)
            if name == "aten::arange":
                return True
            first = self.records[prod][IN_DT][:1]
            if name == "aten::_to_copy" and first and first[0] is not None and not first[0].is_floating_point:
                return True
            ins = self.float_inputs(prod)
            if name not in _CARRY or len(ins) != 1:
                return False
            prod = ins[0][1]
            depth -= 1
        return False

    # --- provenance walks ------------------------------------------------------------------------

    def upstream(self, prods: Iterable[int], limit: int = 20000, through: Callable[[int], bool] | None = None) -> Iterator[int]:
        """The ops whose values flow into these tensors (producer seqs; leaves are skipped), nearest first, each
        once, at most `limit` of them; with `through`, the walk goes on past an op only where it holds."""
        for s, visit in _walk_back(prods, limit):
            yield s
            if through is not None and not through(s):
                continue
            for _, p in self.float_inputs(s):
                if p >= 0:
                    visit(p)

    def divergence(self, prods: Iterable[int], odd: Any, compute: Any, limit: int = 20000) -> tuple[int | None, list[tuple[int, Any]]]:
        """Walk back from tensors of the `odd` dtype to the first op where an activation in the
        compute dtype became `odd`: a promotion (bf16 activation x fp32 buffer -> fp32) or a cast.
        Returns (origin seq or None, the odd-dtype operands of the origin as (producer, dtype))."""
        candidates: list[int] = []
        leaf_users: list[int] = []
        for s, visit in _walk_back(prods, limit):
            ins = self.float_inputs(s)
            if any(d == compute for d, _ in ins) and self.out_dtype(s) == odd:
                candidates.append(s)
                continue
            for d, p in ins:
                if d == odd:
                    if p >= 0:
                        visit(p)
                    else:
                        leaf_users.append(s)
        pool = candidates or leaf_users
        if not pool:
            return None, []
        origin = min(pool)
        operands = [(p, d) for d, p in self.float_inputs(origin) if d == odd]
        return origin, operands

    def table_origin(self, prod: int, limit: int = 5000) -> tuple[int | None, list[tuple[int, Any]]]:
        """For a half-precision cos/sin table: the op that made it in half precision from a named
        buffer (AMP002) or from nothing (an arange in half), following half-precision inputs back."""
        named: list[int] = []
        creations: list[int] = []
        seen: list[int] = []
        for s, visit in _walk_back([prod], limit):
            seen.append(s)
            ins = self.float_inputs(s)
            if not ins:
                creations.append(s)
            for d, p in ins:
                if d not in HALF:
                    continue
                if p in self.named_seq:
                    named.append(s)
                elif p >= 0:
                    visit(p)
                elif -p in self.leaf_names:
                    named.append(s)
        pool = named or creations or sorted(seen)[:1]
        if not pool:
            return None, []
        origin = min(pool)
        return origin, [(p, d) for d, p in self.float_inputs(origin) if d in HALF]


def _walk_back(starts: Iterable[int], limit: int) -> Iterator[tuple[int, Callable[[int], None]]]:
    """Breadth-first over producer ops from `starts` (op sequence numbers; negative ones are leaves and
    skipped), each op once, at most `limit` ops; the caller enqueues the producers it wants followed."""
    queue = deque(p for p in starts if p >= 0)
    seen: set[int] = set()
    while queue and len(seen) < limit:
        s = queue.popleft()
        if s in seen:
            continue
        seen.add(s)
        yield s, queue.append


def _unwrapped(module: torch.nn.Module) -> torch.nn.Module:
    inner = getattr(module, "_orig_mod", None)
    return inner if isinstance(inner, torch.nn.Module) else module
