"""AMP113 bf16-unsupported-hardware: bf16 is requested on hardware without native bf16 (CUDA compute capability < 8.0, CPU without bf16 instructions, NCCL < 2.10).

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP113`)."""

from __future__ import annotations

import ast
from typing import Iterator

from ampdoctor.core.engine import Places
from ampdoctor.core.model import Severity
from ampdoctor.core.registry import Hit, code_check, policy_check
from ampdoctor.dtypes import BF16
from ampdoctor.facts import RunFacts
from ampdoctor.lint.python.context import CodeHit, Context
from ampdoctor.lint.python.dataflow import BF16 as ONLY_BF16
from ampdoctor.policy import Policy

# NCCL reduces bf16 from 2.10 (torchtune #891).
NCCL_BF16 = (2, 10)


@policy_check("AMP113")
def bf16_unsupported_hardware(policy: Policy | None, facts: RunFacts, at: Places) -> Iterator[Hit]:
    if policy is None or BF16 not in (policy.params, policy.compute):
        return
    bf16_at = at("compute") if policy.compute == BF16 else at("params")
    for device in facts.devices or ():
        if not device.native_bf16 and not device.emulated_bf16:
            where = device.location or at("devices")
            yield Hit(f"bf16 is asked for on {device.name}" + (f" (compute capability {device.capability})" if device.capability else "")
                      + ", which has no native bf16: it is refused or emulated ('Bfloat16 is only supported on GPUs with compute capability of at least 8.0')",
                      where, related=at.others(where, bf16_at))
    if facts.nccl_version is not None and facts.nccl_version[:2] < NCCL_BF16 and (facts.world_size or 2) > 1:
        yield Hit(f"NCCL {'.'.join(map(str, facts.nccl_version))} < 2.10 cannot reduce bf16 tensors", at("nccl_version"))


@code_check("AMP113", triggers=("is_bf16_supported",), also=(("is_available",),), reads_configs=False)
def bf16_chosen_without_cuda(ctx: Context) -> Iterator[CodeHit]:
    # litgpt PR #499: `if not torch.cuda.is_available() or torch.cuda.is_bf16_supported(): return "bf16-mixed"`. A
    # bf16 capability check that counts "no CUDA" as support picks bf16 on every other accelerator, Apple's MPS among
    # them, which refused bf16 before macOS 14 ("MPS BFloat16 is only supported on MacOS 14 or newer").
    for node in ast.walk(ctx.src.tree):
        if not isinstance(node, (ast.If, ast.IfExp)) or not _asks_bf16_support(ctx, node.test):
            continue
        without_cuda = _truth_without_cuda(ctx, node.test)
        if without_cuda is None:
            continue
        chosen = node.body if without_cuda else node.orelse
        if _selects_bf16(ctx, chosen, ctx.src.scope(node)):
            yield node.test, (f"`{ast.unparse(node.test)[:70]}` is {without_cuda} on any machine without CUDA, so bf16 is "
                              "chosen there unchecked: Apple MPS refuses bf16 before macOS 14; test the device that will "
                              "run (MPS, CPU) before choosing bf16"), Severity.WARNING


def _asks_bf16_support(ctx: Context, test: ast.expr) -> bool:
    return any(isinstance(n, ast.Call) and (ctx.qualname(n.func) or "").endswith("cuda.is_bf16_supported") for n in ast.walk(test))


def _truth_without_cuda(ctx: Context, test: ast.expr) -> bool | None:
    """The test's value where `torch.cuda.is_available()` is False, when that alone decides it (None: it does not)."""
    if isinstance(test, ast.Call) and ctx.qualname(test.func) == "torch.cuda.is_available":
        return False
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _truth_without_cuda(ctx, test.operand)
        return None if inner is None else not inner
    if isinstance(test, ast.BoolOp):
        values = [_truth_without_cuda(ctx, v) for v in test.values]
        decisive = isinstance(test.op, ast.Or)  # True decides an `or`, False an `and`
        if decisive in values:
            return decisive
        return None if None in values else not decisive
    return None


def _selects_bf16(ctx: Context, chosen: ast.AST | list[ast.stmt], scope: ast.AST) -> bool:
    """The branch returns or assigns bf16 (``"bf16-mixed"``, ``torch.bfloat16``) and no other precision."""
    if isinstance(chosen, ast.expr):
        return ctx.flow.dtype_of(chosen, scope) == ONLY_BF16
    values = [s.value for s in chosen if isinstance(s, (ast.Return, ast.Assign)) and s.value is not None]
    return bool(values) and all(ctx.flow.dtype_of(v, scope) == ONLY_BF16 for v in values)
