"""AMP212 half-precision-overflow: an activation or gradient exceeded the largest finite fp16/bf16 value.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP212`)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

from ampdoctor.audit.evidence import Phase
from ampdoctor.audit.names import module_label
from ampdoctor.core.model import Severity
from ampdoctor.core.registry import Hit, code_check, runtime_check
from ampdoctor.dtypes import FP16, name_of
from ampdoctor.lint.python.context import CodeHit, Context, contracts
from ampdoctor.lint.python.dataflow import HALF
from ampdoctor.lint.python.fp32 import fp32_made
from ampdoctor.lint.python.resolve import last_identifier

if TYPE_CHECKING:
    from ampdoctor.audit.analysis import RuntimeContext

# inf from log(0) is no overflow (AMP214 names it).
_NOT_OVERFLOW = frozenset({"aten::log", "aten::log_", "aten::log2", "aten::log10", "aten::log1p", "aten::xlogy"})
_LARGEST = {"fp16": 65504.0, "bf16": 3.3895313892515355e38}


@runtime_check("AMP212")
def overflow_in_half(ctx: RuntimeContext) -> Iterator[Hit]:
    flow = ctx.values
    t = ctx.trace
    groups: dict[tuple[int, str], list[int]] = {}
    for origin in flow.origins:
        op = t.op_at(origin.seq)
        out = op.out_dtypes
        if origin.kind != "inf" or not out or out[0] not in ctx.HALF or t.op(origin.seq) in _NOT_OVERFLOW:
            continue
        if op.phase == Phase.BACKWARD and ctx.loss_scaled:
            continue  # the scaler skips this step and lowers its scale: by design
        groups.setdefault((op.module, op.phase), []).append(origin.seq)
    ranges: dict[str, dict] = {}
    for (mod, phase), seqs in groups.items():
        first = seqs[0]
        dt = name_of(t.op_at(first).out_dtypes[0])
        if dt not in ranges:
            ranges[dt] = {(m.module, m.phase): m for m in flow.module_ranges(dt)}
        rng = ranges[dt][(mod, phase)]
        ins = flow.input_stats(first)
        largest = max((s.amax for _, _, s in ins if s is not None), default=0.0)
        module = t.module(mod)
        more = f"; {len(seqs)} ops overflowed there" if len(seqs) > 1 else ""
        yield Hit(
            f"{dt} overflow in the {phase} of {module_label(module)}: {t.op(first)} made inf from finite inputs "
            f"(largest input {largest:.3g}, {dt} ends at {_LARGEST[dt]:.6g}); {rng.fraction(rng.overflow):.1%} of the "
            f"sampled {phase} values of this module are beyond {dt}'s range{more}",
            flow.location(first),
            related=tuple(ctx.operand_location(p, d, f"operand made here (max |x| {s.amax:.3g})") for d, p, s in ins if s is not None),
            details={"dtype": dt, "phase": phase, "module": module, "ops": len(seqs), "input_amax": largest,
                     "overflow_fraction": rng.fraction(rng.overflow)},
        )


# --- code: the static view --------------------------------------------------------------------------------------

_KEYS = frozenset({"k", "key", "keys"})
_VALUES = frozenset({"v", "value", "values"})
_TRANSPOSES = frozenset({"transpose", "mT", "t", "permute"})


def _untransposed(expr: ast.AST) -> ast.AST:
    """The tensor a transpose is taken of (``k`` of ``k.transpose(-1, -2)`` or ``k.mT``); any other expression as is."""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in _TRANSPOSES:
        return expr.func.value
    if isinstance(expr, ast.Attribute) and expr.attr in _TRANSPOSES:
        return expr.value
    return expr


def _named(expr: ast.AST, words: frozenset[str]) -> bool:
    """The operand is a tensor named as the keys (or values) themselves, ``k``/``key``/``keys``, through a transpose
    (``k.transpose(-1, -2)``, ``k.mT``): not a chunk of them (``k_i``, a recurrence's per-chunk product, bounded by
    the chunk), a weight (``value_weight``) or a cache."""
    expr = _untransposed(expr)
    return isinstance(expr, (ast.Name, ast.Attribute)) and (last_identifier(expr) or "").lower() in words


def _key_value_products(ctx: Context) -> Iterator[tuple[ast.AST, list[ast.AST]]]:
    """Products of keys with values: ``k.transpose(-1, -2) @ v``, ``torch.matmul(k.mT, v)``, an einsum of k and v
    that sums an index of both (``einsum("bhdn,bhen->bhde", k, v)``). Softmax attention multiplies queries with keys
    and probabilities with values, never keys with values: this is linear attention's context, a sum over every
    position of the sequence."""
    for node in ctx.src.matmuls:
        if _named(node.left, _KEYS) and _named(node.right, _VALUES):
            yield node, [node.left, node.right]
    for call in ctx.src.calls:
        if len(call.args) not in (2, 3):
            continue  # none of the products below
        name = ctx.qualname(call.func)
        if name == "torch.einsum" and contracts(call) and len(call.args) == 3 and _named(call.args[1], _KEYS) \
                and _named(call.args[2], _VALUES):
            yield call, call.args[1:]
        elif name in ("torch.matmul", "torch.bmm") and len(call.args) == 2 and _named(call.args[0], _KEYS) \
                and _named(call.args[1], _VALUES):
            yield call, list(call.args)


def _last_binding(ctx: Context, operand: ast.AST, node: ast.AST) -> ast.AST | None:
    """What the operand's name (through a transpose) was last bound to before the product, in its scope."""
    name = _untransposed(operand)
    if not isinstance(name, ast.Name):
        return None
    before = [v for line, v in ctx.src.bindings(name, ctx.src.scope(node)) if line < node.lineno and v is not None]
    return before[-1] if before else None


def _normalized(ctx: Context, keys: ast.AST, node: ast.AST) -> bool:
    """The keys went through a softmax before the product (``k = k.softmax(dim=-1)``, ``F.softmax(k, -2)``): over the
    sequence, every context entry is a weighted mean of values and stays within their range. Which axis it normalised
    is not read: any softmax of the keys is taken for that one."""
    value = _last_binding(ctx, keys, node)
    return isinstance(value, ast.Call) and (last_identifier(value.func) or "") in ("softmax", "log_softmax")


def _single_position(ctx: Context, node: ast.AST) -> bool:
    """The product runs only for one position (``if L == 1:``, a decoding step): it sums a single term."""
    for parent, child in ctx.src.steps(node):
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return False
        test = parent.test if isinstance(parent, ast.If) and child in parent.body else None
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq) \
                and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value == 1:
            return True
    return False


def _softmaxed_after(ctx: Context, node: ast.AST) -> bool:
    """The product is itself softmaxed (``attn = k.transpose(-1, -2) @ v; attn = attn.softmax(-1)``): channel
    attention's scores, not a linear attention's context."""
    parent = ctx.src.parents.get(node)
    if not (isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name)):
        return False
    name = parent.targets[0].id
    fn = ctx.src.enclosing_function(node)
    return any(call.lineno > node.lineno and (last_identifier(call.func) or "") in ("softmax", "log_softmax")
               and any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(call)) for call in ctx.src.calls_in(fn))


def _made_from_keys(ctx: Context, keys: ast.AST, values: ast.AST, node: ast.AST) -> bool:
    """The values are computed from the keys (``value = key.transpose(-1, -2) / norm``: an iterate of a matrix
    inverse, a Gram product): linear attention's keys and values are two projections of the input, never one made
    from the other, so this is no key-value context."""
    base = _last_binding(ctx, values, node)
    key = _untransposed(keys)
    return base is not None and isinstance(key, ast.Name) and any(isinstance(n, ast.Name) and n.id == key.id for n in ast.walk(base))


def _divided(ctx: Context, operand: ast.AST, node: ast.AST) -> bool:
    """The operand was last bound, before the product, to a quotient (``v = v / (h * w)``): scaled down by the
    sequence length, so the sum stays in range."""
    value = _last_binding(ctx, operand, node)
    return isinstance(value, ast.BinOp) and isinstance(value.op, ast.Div)


def _fp16_runs(ctx: Context) -> str | None:
    """Why this code may run in fp16 (None: nothing linted says so, or it runs in bf16 only)."""
    precisions = ctx.project.precisions & HALF
    if ctx.facts.fp16_possible:
        return "this file runs fp16 code"
    if FP16 in precisions:
        return "a training config or file of this project runs it in fp16"
    return None


def _runs_in_fp16(ctx: Context, node: ast.AST, operands: list[ast.AST]) -> bool:
    """The product is known to run in fp16, not merely able to: an fp16 autocast of this file reaches it (one without
    a dtype is fp16 on CUDA), or fp16 is the only half precision the project runs it in. An fp16 the code offers
    beside bf16 (``torch.bfloat16 if use_bf16 else torch.float16``) leaves it a note."""
    autocast = ctx.facts.half_autocast_reaching([node])
    if autocast is not None and (ctx.facts.autocast_dtypes(autocast) or {FP16}) == {FP16}:
        return True
    scope = ctx.src.scope(node)
    if any(ctx.flow.tensor_dtype(o, scope) == {FP16} for o in operands):
        return True  # an operand the code makes fp16 itself
    return ctx.project.precisions & HALF == {FP16}


@code_check("AMP212", triggers=("einsum", "@", "matmul"), also=(("k", "key"),), project=True)
def linear_attention_context_in_half(ctx: Context) -> Iterator[CodeHit]:
    """Linear attention's context (keys times values, summed over every position) computed in half precision: its
    entries grow with the sequence length (h*w positions of a feature map), and fp16 ends at 65504, so long inputs
    overflow to inf and the output turns NaN (efficientvit's LiteMSA, the linear attention of diffusion UNets). A
    warning where it is known to run in fp16 (`_runs_in_fp16`); a note where fp16 is only possible or nothing linted
    says which half dtype runs it (bf16 has fp32's range). Operands made fp32, or a region with autocast off, are left alone."""
    products = list(_key_value_products(ctx))  # first: most files hold none, and the precision facts read the file
    why = _fp16_runs(ctx) if products else None
    if not products or why is None and (ctx.facts.bf16_evidence is not None or ctx.project.precisions & HALF):
        return  # no such product, or bf16 holds the sum
    for node, operands in products:
        scope = ctx.src.scope(node)
        if ctx.facts.autocast_off_at(node) or _single_position(ctx, node) or _normalized(ctx, operands[0], node) or _softmaxed_after(ctx, node) or any(
                fp32_made(ctx, o, scope) is not None or _divided(ctx, o, node) for o in operands) or _made_from_keys(ctx, *operands, node):
            continue
        where = f" ({why})" if why else ""
        yield node, (f"linear attention's context `{ast.unparse(node)[:50]}` sums key-value products over every position "
                     f"in the input's dtype{where}: it grows with the sequence length, and in fp16 (largest value 65504) a long "
                     f"sequence overflows to inf; compute it in fp32 (`.float()` operands with autocast off) or scale the "
                     f"values by 1/n first"), Severity.WARNING if why and _runs_in_fp16(ctx, node, operands) else Severity.INFO
