"""The typed vocabulary runtime rules read a recording in, without knowing how the recorder stores it: `Op`, a named
view over one op record (records stay plain tuples on the hot path), the evidence tags the recorder and the value
watch attach to records (`Tag`), when `.grad` was looked at (`When`), and frozen records of the optimizer steps,
gradient snapshots and buffer scans. `provenance.Trace` hands them out (`trace.ops()`, `trace.optimizer_steps`, ...)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Callable

from ampdoctor.audit.fields import (
    AUTOCAST,
    BACKWARD,
    CODE,
    EXTRA,
    FORWARD,
    FUNC,
    IN_DT,
    IN_PROD,
    INNER,
    LASTI,
    MOD,
    OPTIMIZER,
    OUT_DT,
    PHASE,
    SEQ,
)


class Phase(str, enum.Enum):
    """Where in the step an op ran (`Op.phase`)."""

    FORWARD = FORWARD
    BACKWARD = BACKWARD
    OPTIMIZER = OPTIMIZER


class Tag(str, enum.Enum):
    """What a watched op's record says about its values (the first item of its `extra`)."""

    ANGLE = "angle"  # a cos/sin of angles: (ANGLE, the largest |angle|)
    POSITIONS = "positions"  # integer positions made or cast to a float: (POSITIONS, the largest, "arange" | "cast")
    ACCUMULATE = "accumulate"  # autograd's AccumulateGrad adding into a `.grad`: (ACCUMULATE, id of the parameter)
    FLOPS = "flops"  # a matmul: (FLOPS, formula, shapes...) for `RuntimeContext.matmul_flops`
    LOSS = "loss"  # a loss function: (LOSS, producer of its input, the input's dtype)
    # an in-place lerp_ into a half tensor outside optimizer.step (a moving average of weights):
    # (AVERAGE, sampled updates smaller than half a unit in the last place of the value they move, updates sampled)
    AVERAGE = "average"
    # an in-place add into a small half tensor outside modules, backward and optimizer.step (a running sum):
    # (RUNNING_SUM, increments smaller than half a unit in the last place of the sum, increments sampled)
    RUNNING_SUM = "running_sum"

    # a finite constant that became inf in a half tensor: (FILL, the number, the dtype, "fill" for a Python number
    # made into the tensor, "cast" for an fp32 tensor holding it, such as a mask filled with float32's min, cast to half)
    FILL = "fill"
    # a finite number written into a half tensor by masked_fill_ or masked_fill (`mask.masked_fill_(mask == -inf,
    # finfo(half).min)`) that leaves no row of nothing but infinities: code that replaces the infinities a cast just
    # made: (REFILL,)
    REFILL = "refill"


class When(str, enum.Enum):
    """When the dtypes of `.grad` were looked at."""

    BEFORE_MICRO_BATCH = "before micro-batch"  # a root module entered after a backward: the next one accumulates
    AFTER_BACKWARD = "after backward"  # a trainer said its backward ended (Lightning)
    BEFORE_OPTIMIZER_STEP = "before the optimizer step"  # a trainer is about to step (HF Trainer, Lightning)
    OPTIMIZER_STEP = "optimizer step"  # at the step, for each parameter it updates
    END = "end"  # recording stopped


class Op:
    """One recorded aten op, by name: ``op.in_dtypes`` instead of ``record[IN_DT]``. A view, made when asked."""

    __slots__ = ("record",)

    def __init__(self, record: tuple) -> None:
        self.record = record

    seq = property(lambda self: self.record[SEQ])
    func_id = property(lambda self: self.record[FUNC])  # id of the OpOverload; `Trace.op(seq)` gives its name
    in_dtypes = property(lambda self: self.record[IN_DT])
    # For each input: the seq of the op that made it, minus the id of a leaf (parameter, buffer, input), or None.
    producers = property(lambda self: self.record[IN_PROD])
    out_dtypes = property(lambda self: self.record[OUT_DT])  # None when the op raised
    module = property(lambda self: self.record[MOD])  # index of the module it ran in, -1 for none
    phase = property(lambda self: self.record[PHASE])  # a `Phase` value
    code = property(lambda self: self.record[CODE])
    lasti = property(lambda self: self.record[LASTI])
    inner = property(lambda self: self.record[INNER])
    autocast = property(lambda self: self.record[AUTOCAST])  # autocast was on for it
    extra = property(lambda self: self.record[EXTRA])

    def tagged(self, tag: Tag) -> bool:
        extra = self.record[EXTRA]
        return bool(extra) and extra[0] == tag


@dataclass(frozen=True)
class GradSnapshot:
    """A parameter's `.grad` dtype at one moment, and the dtype it should have."""

    when: str  # a `When`
    backward_passes: int  # backward passes since the last optimizer step, at that moment
    param_id: int
    grad_dtype: Any
    param_dtype: Any  # `recorder.expected_grad_dtype`: the parameter's dtype unless it asks for another grad dtype


@dataclass(frozen=True)
class OptimizerStep:
    """One recorded optimizer step: what it updated and how much of a half-precision update rounded away."""

    optimizer: str  # class name
    module: str  # the optimizer class's module
    backward_passes: int  # micro-batches accumulated into this step
    unchanged: int  # sampled half-precision elements with a nonzero gradient that the step left bit-identical
    considered: int  # sampled half-precision elements with a nonzero gradient
    per_param: tuple[tuple[int, int, int], ...]  # (param id, unchanged, considered)
    state_dtypes: dict = field(default_factory=dict)  # (state key, dtype) -> ids of the parameters holding such state
    frame: tuple = (None, 0)  # (code, line) of the user's step() call


@dataclass(frozen=True)
class BufferScan:
    """A floating buffer or tensor attribute of a module, seen before its first call or after recording."""

    module: int  # module index
    name: str
    dtype: Any
    shape: tuple
    when: str  # "before" or "after"
    ref: Callable[[], Any]  # weakref of the tensor
    # The tensor as the record knows it when scanned (its producing op, or minus its id if no recorded op made it):
    # it names the tensor in the record after the step replaced it.
    prod: int | None = None
