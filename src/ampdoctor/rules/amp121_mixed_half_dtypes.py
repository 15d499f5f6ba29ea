"""AMP121 mixed-half-dtypes: bf16 and fp16 tensors meet in one graph.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP121`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from ampdoctor.core.engine import Places
from ampdoctor.core.model import Severity
from ampdoctor.core.registry import Hit, code_check, policy_check, runtime_check
from ampdoctor.dtypes import FP16, HALF, name_of
from ampdoctor.facts import RunFacts
from ampdoctor.lint.python.context import CodeHit, Context, calls_named
from ampdoctor.lint.python.dataflow import autocast_argument, describe
from ampdoctor.lint.python.facts import AUTOCASTS
from ampdoctor.lint.python.resolve import keyword
from ampdoctor.policy import Policy

FSDP_POLICIES = frozenset({"torch.distributed.fsdp.MixedPrecision", "torch.distributed.fsdp.MixedPrecisionPolicy",
                           "torch.distributed.fsdp.fully_sharded_data_parallel.MixedPrecision",
                           "torch.distributed._composable.fsdp.MixedPrecisionPolicy"})


@code_check("AMP121", triggers=("MixedPrecision",), also=(("autocast",),))
def autocast_against_fsdp_param_dtype(ctx: Context) -> Iterator[CodeHit]:
    # FSDP casts the sharded weights to `param_dtype` for compute; an autocast of the other half dtype in the same
    # file then feeds bf16 weights with fp16 activations (or the reverse): one graph, two half types.
    policies = []
    for call, _ in calls_named(ctx, FSDP_POLICIES):
        found = ctx.flow.dtype_of(keyword(call, "param_dtype"), ctx.src.scope(call))
        if found and len(found) == 1 and found <= HALF:
            policies.append((call, found))
    if not policies:
        return
    for call, name in calls_named(ctx, AUTOCASTS):
        dtype = ctx.flow.dtype_of(autocast_argument(call, name, "dtype"), ctx.src.scope(call))
        if not dtype or len(dtype) != 1 or not dtype <= HALF:
            continue
        for fsdp, param in policies:
            if param != dtype and not ctx.src.exclusive(call, fsdp):
                # Autocast casts the weights of its matmuls and convolutions again, to its own dtype, and the other ops
                # promote: the step runs (a BatchNorm, whose kernel takes one dtype, refuses the pair), in the
                # narrower range or precision of the two.
                yield call, (f"autocast computes in {describe(dtype)} while FSDP's `param_dtype` casts the weights to "
                             f"{describe(param)} (line {fsdp.lineno}): bf16 and fp16 meet in one graph, and autocast "
                             f"casts the {describe(param)} weights again to {describe(dtype)}"), Severity.WARNING
                break

if TYPE_CHECKING:
    from ampdoctor.audit.analysis import RuntimeContext


@policy_check("AMP121")
def mixed_half_dtypes_policy(policy: Policy | None, facts: RunFacts, at: Places) -> Iterator[Hit]:
    # bf16 and fp16 in one graph ("Input type (c10::BFloat16) and bias type (c10::Half) should be the same").
    if policy is None:
        return
    if policy.params in HALF and policy.compute in HALF and policy.params != policy.compute:
        here = at("compute")
        if policy.compute == FP16 and policy.loss_scale != "none":
            # The fp16 GradScaler unscales bf16 gradients: its CUDA kernel has no bf16 ('not implemented for BFloat16').
            yield Hit(f"weights are {policy.params} but compute is {policy.compute}: bf16 and fp16 meet in one graph, and the fp16 "
                      "loss scaler's unscale kernel refuses the bf16 gradients", here, related=at.others(here, "params"))
        else:
            # Autocast casts the weights of its lower-precision ops (linear, conv, matmul) to its dtype and the other ops
            # promote, so the step runs; only a kernel that insists on one dtype (a BatchNorm) refuses the pair.
            yield Hit(f"weights are {policy.params} but compute is {policy.compute}: bf16 and fp16 meet in one graph (autocast "
                      f"casts the weights of matmuls to {policy.compute} on every step, where "
                      + ("bf16 weights can overflow fp16)" if policy.compute == FP16 else "fp16 weights lose precision)"), here, severity=Severity.WARNING, related=at.others(here, "params"))
    if facts.eval_dtype in HALF and policy.compute in HALF and facts.eval_dtype != policy.compute:
        here = at("eval_dtype")
        why = "bf16 weights can overflow fp16" if facts.eval_dtype == FP16 else "fp16-trained weights lose precision in bf16"
        yield Hit(f"evaluation casts the whole model to {facts.eval_dtype} while training computes in {policy.compute} ({why})",
                  here, severity=Severity.WARNING, related=at.others(here, "compute"))


@runtime_check("AMP121")
def both_halves_in_one_op(ctx: RuntimeContext) -> Iterator[Hit]:
    """bf16 and fp16 operands of one op. An error where the run failed there (a kernel that takes one dtype: addmm's
    "mat1 and mat2 must have the same dtype", a convolution's "Input type ... and bias type ... should be the same"); a
    warning where the op ran: it promoted the pair (to fp32 outside autocast, or autocast's own dtype), so nothing
    failed, but the two half types meet and one of them is read in the other's narrower range or precision."""
    t = ctx.trace
    both = {ctx.BF16, ctx.FP16}
    site = ctx.failure
    if site is not None and both <= {d for d, _ in site.inputs} and ctx.failure_is_dtype_mismatch():
        yield Hit(f"{site.head}: bf16 and fp16 meet there and the step fails", site.where, severity=Severity.ERROR)
        return
    for op in t.mixed():
        present = {d for d, p in zip(op.in_dtypes, op.producers) if p is not None}
        if both <= present and op.out_dtypes:
            under = " under autocast" if op.autocast else ""
            yield Hit(f"{t.op(op.seq)} receives both bf16 and fp16 tensors{under} and ran, promoting them to "
                      f"{name_of(op.out_dtypes[0])}: nothing failed, but two half types meet in one graph (a kernel that takes one "
                      "dtype, a convolution's, refuses the pair; a cast between them overflows bf16 values in fp16 and rounds "
                      "fp16 ones in bf16)", t.location(op.seq), severity=Severity.WARNING)
            return
