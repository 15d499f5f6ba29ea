"""Where a failing step failed: the op whose kernel raised, or, for a Python-level failure (a kernel wrapper's
assert, incident 5), the innermost user frame and its tensor arguments. Runtime rules read the failure's
float inputs and walk them back to their origin."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import torch

from ampdoctor.audit.dispatch import AUDIT_DIR
from ampdoctor.audit.fields import FORWARD
from ampdoctor.audit.names import dtypes_text, relpath
from ampdoctor.audit.provenance import FLOATS, Trace
from ampdoctor.core.model import Location
from ampdoctor.dtypes import name_of


@dataclass(frozen=True)
class FailureSite:
    where: Location
    inputs: tuple[tuple[Any, int], ...]  # (dtype, producer seq or minus a leaf id) of the float operands
    head: str  # "aten::bmm failed on fp32, bf16 inputs"
    seq: int | None  # the failing op's record, when an op failed


def same_exception(recorded: BaseException, raised: BaseException) -> bool:
    """Is `recorded` (what an op raised) `raised` or one of its causes/contexts?"""
    e: BaseException | None = raised
    for _ in range(8):
        if e is None:
            return False
        if e is recorded:
            return True
        e = e.__cause__ or e.__context__
    return False


def _frames(exc: BaseException) -> list[TracebackType]:
    """The traceback's frames, less the audit's own (its function mode wraps the calls it watches)."""
    tb: TracebackType | None = exc.__traceback__
    frames = []
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(AUDIT_DIR):
            frames.append(tb)
        tb = tb.tb_next
    return frames


_META_FUNCTIONS = os.path.join(os.path.dirname(torch.__file__), "_meta_registrations.py")


def raised_by_meta_function(exc: BaseException) -> bool:
    """The exception was raised by torch's meta function of an op, the shape-and-dtype rules fake tensors run instead
    of a kernel: a check there may be stricter than the real CPU and CUDA kernels (the grouped matmul's meta function
    takes bf16 only; the kernels take fp32 too)."""
    return any(tb.tb_frame.f_code.co_filename == _META_FUNCTIONS for tb in _frames(exc))


def raise_site(exc: BaseException) -> Location | None:
    """The innermost frame outside the audit: where a call failed that reached no recorded op (a composite op's own
    dtype check, such as an FFT's) and held no tensors of two dtypes."""
    frames = _frames(exc)
    if not frames:
        return None
    code = frames[-1].tb_frame.f_code
    return Location(file=relpath(code.co_filename), line=frames[-1].tb_lineno, label=f"in {code.co_name}")


def failure_site(trace: Trace, exc: BaseException | None) -> FailureSite | None:
    if exc is None:
        return None
    failure = trace.rec.failure
    if failure is not None and same_exception(failure.exc, exc):
        s = failure.seq
        ins = tuple(trace.float_inputs(s))
        return FailureSite(trace.location(s), ins, f"{trace.op(s)} failed on {dtypes_text(d for d, _ in ins)} inputs", s)
    boundary = _boundary(trace, exc)
    if boundary is None:
        return None
    where, tensors = boundary
    ins = tuple((t.dtype, trace.key_of(t)) for _, t in tensors)
    names = ", ".join(f"{n}={name_of(t.dtype)}" for n, t in tensors)
    return FailureSite(where, ins, f"{where.op} raised {type(exc).__name__} with tensor arguments {names}", None)


def _boundary(trace: Trace, exc: BaseException) -> tuple[Location, list[tuple[str, Any]]] | None:
    """A Python-level failure: the innermost of the last three frames that holds float tensors of two dtypes."""
    import torch

    frames = _frames(exc)
    for tb in reversed(frames[-3:]):
        frame = tb.tb_frame
        tensors = [(k, v) for k, v in frame.f_locals.items() if isinstance(v, torch.Tensor) and v.dtype in FLOATS]
        if len({t.dtype for _, t in tensors}) > 1:
            code = frame.f_code
            where = Location(file=relpath(code.co_filename), line=tb.tb_lineno, module=_running_module(trace, frames),
                             op=f"{code.co_name}()", phase=FORWARD)
            return where, tensors
    return None


def _running_module(trace: Trace, frames: list[TracebackType]) -> str | None:
    """The innermost module whose forward is on the failing stack."""
    import torch

    for outer in reversed(frames):
        m = outer.tb_frame.f_locals.get("self")
        if isinstance(m, torch.nn.Module):
            idx = trace.rec.module_index_of(m)
            return trace.module(idx) if idx is not None else None
    return None


def is_rope_failure(trace: Trace, inputs: tuple[tuple[Any, int], ...]) -> bool:
    """A cos/sin table and another operand of a different dtype meet at the failure (incidents 1 and 5)."""
    trig = {d for d, p in inputs if trace.is_trig(p)}
    other = {d for d, p in inputs if not trace.is_trig(p)}
    return bool(trig and other and trig != other)


# Errors that say two operands' dtypes disagree. An op that failed otherwise (a shape error, a kernel not implemented
# for bf16, GradScaler's unscale on bf16 gradients) did not fail because of its dtypes, whatever dtypes it received.
_MISMATCH = re.compile(r"same dtype|same type|scalar type|expected dtype|dtype mismatch|found dtype|type \(.*\) should be the same|"
                       r"expected (bfloat16|float|half|double)\w*, got (bfloat16|float|half|double)", re.IGNORECASE)


def is_dtype_mismatch(exc: BaseException | None) -> bool:
    return exc is not None and bool(_MISMATCH.search(str(exc)))
