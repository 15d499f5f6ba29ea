"""The value watch: what the values of every op's result were, recorded next to the op's dtypes.

Per op that computes new values (views and uninitialised allocations are skipped): the largest magnitude over the
whole result (its min and max in one pass, so that a single inf or NaN is never missed), and on a strided sample of at
most `SAMPLE` elements how many values are zero, would flush to zero, would fall below fp16's normal range or
would overflow when cast to fp16 or bf16. The statistics stay on the tensor's device and are read back in
batches (`FLUSH_EVERY` ops), so recording does not synchronise with the device per op.

Thresholds are where round-to-nearest-even decides (a value is compared as |x| <= bound):
- fp16 flushes to zero at |x| <= 2**-25 (half its smallest subnormal 2**-24 ~ 6e-8; the tie rounds to 0),
  is subnormal below 2**-14 ~ 6.1e-5 (fewer significant bits), and overflows to inf from 65520 on
  (65504 + half an ulp; values in (65504, 65520) still round to 65504).
- bf16 flushes at |x| <= 2**-134 (half of 2**-133 ~ 9.2e-41) and overflows from 2**128 - 2**119 ~ 3.3961e38.
Reading the numbers (after the step) needs no torch: `ValueStats`.
"""

from __future__ import annotations

import functools
import math
import weakref
from dataclasses import dataclass
from typing import Any

SAMPLE = 1 << 12
# Results up to this many elements are read in full (their min and max); larger ones (logits, embedding gradients)
# only through the sample, so that the watch costs about one pass over the activations rather than over
# everything. `ValueWatch(exact_limit=None)` reads every element of every result.
EXACT_LIMIT = 1 << 20
FLUSH_EVERY = 2048
# Ops whose result is not computed from values: uninitialised memory may hold anything, NaN included.
_UNINITIALISED = ("empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "resize_", "set_", "empty_permuted")
# Views whose schema does not say so: their values are their input's.
_UNMARKED_VIEWS = ("_unsafe_view", "_reshape_alias", "unsafe_split", "unsafe_split_with_sizes", "unsafe_chunk")
_SKIP_NAMESPACES = frozenset({"c10d", "_c10d_functional", "c10d_functional", "_dtensor", "profiler"})
# The bound names, in the order of `BOUNDS` (cumulative counts of |x| <= bound).
_BOUND_NAMES = ("zero", "bf16_flush", "fp16_flush", "fp16_normal", "fp16_finite", "bf16_finite", "inf")


@functools.lru_cache(maxsize=1)
def _bounds() -> tuple[float, ...]:
    """Computed once per process: constants, and under a fake audit's FakeTensorMode each op here is a fake one."""
    import torch

    def below(x: float) -> float:
        return float(torch.nextafter(torch.tensor(x, dtype=torch.float32), torch.tensor(0.0)))

    return (0.0, 2.0**-134, 2.0**-25, below(2.0**-14), below(65520.0), below(2.0**128 - 2.0**119), math.inf)


@dataclass(frozen=True)
class ValueStats:
    """The values of one op's result: `amax` over all elements; counts over `sampled` of them (0 when not sampled)."""

    amax: float
    sampled: int = 0
    le: tuple[int, ...] = ()  # cumulative counts of |x| <= each bound, in `_BOUND_NAMES` order
    intentional: bool = False  # a non-finite scalar argument (`masked_fill(-inf)`, `full(-inf)`) made them on purpose
    exact: bool = True  # amax read from every element (else from the sample: an isolated inf may be missed)
    # the sample's squared L2 norm, and the part of it carried by values that flush to zero in bf16 and in fp16: what
    # a flush loses is mass, and fp32 denormals flushed by bf16 carry none of it
    mass: tuple[float, float, float] = ()

    def lost_mass(self, dtype: str) -> float | None:
        """The share of the sample's squared L2 norm that flushes to zero in `dtype` ("fp16"/"bf16"); None unknown."""
        if not self.mass or not self.mass[0] or not math.isfinite(self.mass[0]):
            return None
        return self.mass[1 if dtype == "bf16" else 2] / self.mass[0]

    @property
    def has_nan(self) -> bool:
        return math.isnan(self.amax)

    @property
    def finite(self) -> bool:
        return math.isfinite(self.amax)

    def count(self, what: str, dtype: str) -> int:
        """Sampled values that are `zero`, `flush` (nonzero, round to 0 in `dtype`), `subnormal` (fp16 only) or
        `overflow` (beyond the largest finite `dtype` value, inf included) when cast to `dtype` ("fp16"/"bf16")."""
        if not self.le:
            return 0
        c = dict(zip(_BOUND_NAMES, self.le))
        if what == "zero":
            return c["zero"]
        if what == "flush":
            return c[f"{dtype}_flush"] - c["zero"]
        if what == "subnormal":
            return c["fp16_normal"] - c["fp16_flush"] if dtype == "fp16" else 0
        if what == "overflow":
            return c["inf"] - c[f"{dtype}_finite"]
        raise ValueError(what)


class ValueWatch:
    """The hot-path half: `output(seq, func, tensors)` per op and `leaf(tensor, seq)` per leaf input seen; `stats`
    and `leaf_stats` hold the numbers once `flush()` has run (the recorder flushes when it stops)."""

    def __init__(self, params: dict[int, Any] | None = None, exact_limit: int | None = EXACT_LIMIT) -> None:
        import torch

        from ampdoctor.audit.watch import no_values  # imports torch: not at module level (analysis reads ValueStats)

        self._torch = torch
        # Subclasses (fake, functional, DTensor) and meta tensors are not measured: only tensors that hold their values.
        self._no_values = no_values
        self.stats: dict[int, ValueStats] = {}
        self.leaf_stats: dict[int, list[tuple[int, ValueStats]]] = {}  # leaf id -> [(first seq seen, stats)]
        # seq of a forward op -> the autograd sequence number its node got, to map a backward op to its forward line
        # (in two parallel lists: one pair of ints per forward op, no tuple that outlives it)
        self.forward_seqs: list[int] = []
        self.forward_nrs: list[int] = []  # the sequence number the node of the op at forward_seqs[i] would get
        self.backward_nrs: dict[int, int] = {}  # seq of a backward op -> the sequence number of its node
        self._leaf_refs: dict[int, Any] = {}
        self._pending: list[tuple] = []
        self._how: dict[int, Any] = {}  # op id -> None (skip), "out", or the indices of the arguments it writes
        self._bounds: dict[Any, Any] = {}
        self._bound_values = _bounds()
        self._steps: dict[int, int] = {}
        # id -> weakref of the parameters seen (the recorder's): in the optimizer phase only writes to them are
        # measured, so that a step costs one pass per parameter, not one per moment and temporary.
        self._params = params if params is not None else {}
        self._exact_limit = exact_limit if exact_limit is not None else float("inf")

    # --- hot path --------------------------------------------------------------------------------

    def how(self, fid: int, func: Any) -> Any:
        how = self._how.get(fid, False)
        if how is False:
            how = self._how[fid] = _how_to_measure(func)
        return how

    def output(self, seq: int, fid: int, func: Any, args: tuple, kwargs: dict, outs: list, optimizer: bool = False) -> None:
        how = self.how(fid, func)
        if how is None or (how == "cast" and _widens(args, outs)):
            return  # a widening cast keeps every value: its input's statistics stand for it
        floats = self._results(how, args, outs, optimizer)
        if not floats:
            return
        intentional = _nonfinite_scalar(args) or (bool(kwargs) and _nonfinite_scalar(tuple(kwargs.values())))
        try:
            self._measure(seq, floats, intentional)
        except Exception:  # a tensor kind the reductions do not take: values are a nicety, never a failure
            return

    def _results(self, how: Any, args: tuple, outs: list, optimizer: bool) -> list:
        """The float tensors an op wrote: its outputs, or the arguments an in-place foreach op wrote; in the
        optimizer phase only the parameters among them."""
        if how not in ("out", "cast"):
            outs = []
            for i in how:
                a = args[i] if i < len(args) else None
                if isinstance(a, self._torch.Tensor):
                    outs.append(a)
                elif isinstance(a, (list, tuple)):
                    outs.extend(t for t in a if isinstance(t, self._torch.Tensor))
        skip = self._no_values
        floats = [t for t in outs if not skip(t) and t.is_floating_point() and t.numel()]
        if optimizer:
            params = self._params
            floats = [t for t in floats if (ref := params.get(id(t))) is not None and ref() is t]
        return floats

    def leaf(self, t: Any, seq: int) -> None:
        tid = id(t)
        ref = self._leaf_refs.get(tid)
        if ref is not None and ref() is t:
            return
        if self._no_values(t) or not t.numel():
            return
        try:
            self._leaf_refs[tid] = weakref.ref(t)
            self._measure(("leaf", tid, seq), [t.detach()], False)
        except Exception:  # as above
            return

    def _measure(self, key: Any, floats: list, intentional: bool) -> None:
        torch = self._torch
        t = floats[0]
        if len(floats) > 1:  # foreach ops: the extremes of the whole list, no sample
            if t.device.type == "cpu":
                pairs = [torch.aminmax(x) for x in floats]
                lo, hi = torch.stack([p[0] for p in pairs]).min(), torch.stack([p[1] for p in pairs]).max()
            else:  # one fused kernel on accelerators
                hi = torch.stack(torch._foreach_norm(floats, math.inf)).max()
                lo = hi
            self._pending.append((key, lo, hi, None, 0, int(intentional), None))
        else:
            n = t.numel()
            sample = None
            if t.is_contiguous():
                flat = t.view(-1)
                sample = flat[:: self._step(n)] if n > SAMPLE else flat
            elif n <= SAMPLE:
                sample = t.reshape(-1)
            exact = n <= self._exact_limit or sample is None
            # min and max in one pass (NaN propagates): several times faster on CPU than an inf-norm or abs().max()
            lo, hi = torch.aminmax(t if exact else sample)
            le = None
            if sample is not None:
                bounds = self._bounds.get(t.device)
                if bounds is None:
                    bounds = self._bounds[t.device] = torch.tensor(self._bound_values, dtype=torch.float32, device=t.device)
                below = sample.abs().unsqueeze(-1) <= bounds
                le = below.sum(0)
                # squares relative to the largest value, in float32 (every device has it): a share of the mass is
                # what counts, and a value that small against the largest carries none of it anyway
                a = sample.float().abs()
                sq = (a / a.max().clamp_min(1e-38)).square()
                mass = torch.stack((sq.sum(), (sq * below[:, 1]).sum(), (sq * below[:, 2]).sum()))
            self._pending.append((key, lo, hi, le, sample.numel() if sample is not None else 0, int(intentional) | (0 if exact else 2),
                                  mass if sample is not None else None))
        if len(self._pending) >= FLUSH_EVERY:
            self.flush()

    def _step(self, n: int) -> int:
        """A prime stride, so that a sample of a [.., hidden] tensor visits every column, not every 128th."""
        step = self._steps.get(n)
        if step is None:
            step = max(2, -(-n // SAMPLE))
            while any(step % p == 0 for p in range(2, int(step**0.5) + 1)):
                step += 1
            self._steps[n] = step
        return step

    # --- read back -------------------------------------------------------------------------------

    def flush(self) -> None:
        """Read the pending statistics back, one transfer per device. With every dispatch mode off: this is the audit's
        own arithmetic on the statistics it measured (real tensors, also the constants a fake-tensor run lifts),
        not the program's, and a fake mode on the stack would refuse them."""
        from torch.utils._python_dispatch import _disable_current_modes

        if not self._pending:
            return
        with _disable_current_modes():
            self._flush()

    def _flush(self) -> None:
        torch = self._torch
        pending, self._pending = self._pending, []
        by_device: dict[Any, list[tuple]] = {}
        for p in pending:
            by_device.setdefault(p[1].device, []).append(p)
        for items in by_device.values():
            # stack promotes mixed dtypes (fp16 with bf16 -> fp32): one transfer each for minima and maxima
            extremes = zip(torch.stack([p[1] for p in items]).tolist(), torch.stack([p[2] for p in items]).tolist())
            counted = [p[3] for p in items if p[3] is not None]
            les = iter(torch.stack(counted).tolist() if counted else ())
            weighed = [p[6] for p in items if p[6] is not None]
            masses = iter(torch.stack(weighed).tolist() if weighed else ())
            for (key, _, _, le, n, flags, mass), (lo, hi) in zip(items, extremes):
                amax = math.nan if math.isnan(lo) or math.isnan(hi) else max(-lo, hi)
                stats = ValueStats(amax, n, tuple(next(les)) if le is not None else (), flags & 1 == 1, flags & 2 == 0,
                                   tuple(next(masses)) if mass is not None else ())
                if isinstance(key, tuple):
                    self.leaf_stats.setdefault(key[1], []).append((key[2], stats))
                else:
                    self.stats[key] = stats

    def leaf_at(self, leaf_id: int, seq: int) -> ValueStats | None:
        """The stats of the leaf tensor with this id as it was when op `seq` read it."""
        found = None
        for first, stats in self.leaf_stats.get(leaf_id, ()):
            if first <= seq:
                found = stats
        return found

    def new_window(self) -> None:
        """A sampled audit resumes after unrecorded steps: leaves are measured again when next read (a weight may
        have changed, even turned NaN, in between)."""
        self._leaf_refs.clear()

    def release(self) -> None:
        self._leaf_refs.clear()
        self._pending.clear()


def _wider() -> dict[Any, frozenset]:
    import torch

    wide = frozenset({torch.float32, torch.float64})
    return {torch.float16: wide, torch.bfloat16: wide, torch.float32: frozenset({torch.float64})}


_WIDER = _wider()


def _widens(args: tuple, outs: list) -> bool:
    src = getattr(args[0], "dtype", None) if args else None
    return bool(outs) and outs[0].dtype in _WIDER.get(src, ())


def _nonfinite_scalar(args: tuple) -> bool:
    for a in args:
        if type(a) is float and not math.isfinite(a):
            return True
    return False


def _how_to_measure(func: Any) -> Any:
    """None for ops whose result holds no new values (views, allocations, collectives), "out" for ops whose
    outputs are their results (in-place ops return their `self`), else the indices of the arguments written
    (in-place foreach ops return nothing)."""
    try:
        schema = func._schema
        namespace = func.namespace
    except AttributeError:
        return None
    name = schema.name.split("::", 1)[-1]
    if namespace in _SKIP_NAMESPACES or name in _UNINITIALISED or name in _UNMARKED_VIEWS or name in ("clone", "detach", "lift_fresh", "alias", "contiguous"):
        return None
    if name == "_to_copy":
        return "cast"
    returns = schema.returns
    if returns:
        info = returns[0].alias_info
        return None if info is not None and not info.is_write else "out"
    written = tuple(i for i, a in enumerate(schema.arguments) if a.alias_info is not None and a.alias_info.is_write and not a.kwarg_only)
    return written or None
