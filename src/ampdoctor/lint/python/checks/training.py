"""Checks on the training step: gradients, loss, softmax, optimizer, and tensors leaving torch."""

from __future__ import annotations

import ast
from typing import Iterator

from ampdoctor.lint.python.checks import Context, Hit, calls_named, check
from ampdoctor.lint.python.checks.rope import HALF_WORDS, chain_words
from ampdoctor.lint.python.dataflow import HALF, describe
from ampdoctor.lint.python.resolve import dotted, keyword, last_identifier

SOFTMAXES = frozenset({"torch.softmax", "torch.log_softmax"})
ATTENTION_TOKENS = frozenset({"att", "attn", "attention", "scores", "score", "qk", "sim", "affinity", "attns"})
MATMULS = frozenset({"torch.matmul", "torch.bmm", "torch.einsum", "torch.baddbmm", "torch.mm"})
LOSS_FUNCTIONS = frozenset({
    "torch.nn.functional.cross_entropy", "torch.nn.functional.nll_loss", "torch.nn.functional.binary_cross_entropy_with_logits",
    "torch.nn.functional.kl_div",
})
LOSS_CLASSES = frozenset({"torch.nn.CrossEntropyLoss", "torch.nn.NLLLoss", "torch.nn.BCEWithLogitsLoss", "torch.nn.KLDivLoss"})
PLAIN_OPTIMIZERS = frozenset(f"torch.optim.{n}" for n in (
    "AdamW", "Adam", "SGD", "RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam", "Adadelta", "Adafactor"))
FLOAT_UP = frozenset({"fp32", "fp64"})


def _grad_owner(expr: ast.AST) -> str | None:
    """``p.grad`` / ``p.grad.data`` -> ``p``."""
    if isinstance(expr, ast.Attribute) and expr.attr == "data":
        expr = expr.value
    if isinstance(expr, ast.Attribute) and expr.attr == "grad":
        return dotted(expr.value) or ast.unparse(expr.value)
    return None


@check("grad-dtype-mismatch", triggers=(".grad =", ".grad=", ".grad.data =", ".grad.data="), also=((".to(", ".type(", "float()", "half()", "bfloat16()", "double()"),))
def grad_dtype_mismatch(ctx: Context) -> Iterator[Hit]:
    # Incident 3 (SimpleTuner #854): `param.grad.data = param.grad.data.to(torch.float32)` on a bf16 model,
    # then the next micro-batch's backward cannot accumulate a bf16 grad into the fp32 `.grad`.
    for node in ctx.src.assigns:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1 or not isinstance(node.value, ast.Call):
            continue
        owner = _grad_owner(node.targets[0])
        if owner is None:
            continue
        value = node.value
        dtypes = ctx.flow.cast_dtype(value)
        if not dtypes or not isinstance(value.func, ast.Attribute):
            continue
        source = value.func.value
        while isinstance(source, ast.Call) and isinstance(source.func, ast.Attribute) and source.func.attr in ("detach", "clone", "contiguous"):
            source = source.func.value
        if _grad_owner(source) != owner:
            continue  # writing a cast copy into another tensor's .grad (fp32 master weights) is the fix, not the bug
        in_loop = any(isinstance(a, (ast.For, ast.While)) for a in ctx.src.ancestors(node))
        yield node.targets[0], (f"`{ast.unparse(node.targets[0])}` is retyped to {describe(dtypes)}; the parameter keeps its own dtype, so "
                                f"the next backward{' in this loop' if in_loop else ''} cannot accumulate into it")


def _cast_model_without_autocast(ctx: Context):
    casts = ctx.facts.model_casts
    if not casts or ctx.facts.mixed_precision:
        return None
    return casts[0]


def _in_half_module(ctx: Context, node: ast.AST):
    """The local model cast, if `node` sits in a class of the file that casts its own model to half."""
    cast = ctx.facts.local_half_model
    if cast is None:
        return None
    return cast if any(isinstance(a, ast.ClassDef) for a in ctx.src.ancestors(node)) else None


def _is_fp32(ctx: Context, expr: ast.AST) -> bool:
    dtypes = ctx.flow.tensor_dtype(expr, ctx.src.scope(expr))
    return bool(dtypes) and dtypes <= FLOAT_UP


def _has_matmul(expr: ast.AST, ctx: Context) -> bool:
    for node in ast.walk(expr):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            return True
        if isinstance(node, ast.Call) and ctx.qualname(node.func) in MATMULS:
            return True
    return False


@check("softmax-low-precision", triggers=HALF_WORDS, also=(("softmax",),))
def softmax_low_precision(ctx: Context) -> Iterator[Hit]:
    # B24 (transformers PR #18057): attention softmax of a half model, no autocast to run it in fp32.
    if ctx.facts.local_half_model is None:
        return
    for call in ctx.src.calls:
        func = call.func
        name = ctx.qualname(func)
        if name in SOFTMAXES:
            scores = call.args[0] if call.args else keyword(call, "input")
            dtype_arg = keyword(call, "dtype") or (call.args[2] if len(call.args) > 2 else None)
        elif name is None and isinstance(func, ast.Attribute) and func.attr in ("softmax", "log_softmax"):
            scores = func.value
            dtype_arg = keyword(call, "dtype") or (call.args[1] if len(call.args) > 1 else None)
        else:
            continue
        if scores is None or dtype_arg is not None or _is_fp32(ctx, scores):
            continue
        cast = _in_half_module(ctx, call)
        if cast is not None and (chain_words(scores, ctx, calls_too=False) & ATTENTION_TOKENS or _has_matmul(scores, ctx)):
            yield call, (f"attention softmax runs in {describe(cast.dtypes)}: the model is cast (line {cast.node.lineno}) and no autocast "
                         "runs softmax in fp32; pass `dtype=torch.float32`")


@check("loss-low-precision", triggers=HALF_WORDS, also=(("cross_entropy", "nll_loss", "Loss", "kl_div", "binary_cross_entropy"),))
def loss_low_precision(ctx: Context) -> Iterator[Hit]:
    # B25 (Modalities PR #464): the loss of a half model without `.float()` is quantized to the bf16 grid.
    if ctx.facts.mixed_precision:
        return  # autocast runs cross_entropy/nll_loss in fp32 whatever the logits are
    criteria = set()
    for node in ctx.src.assigns:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and ctx.qualname(node.value.func) in LOSS_CLASSES:
            criteria.update(dotted(t) for t in node.targets)
    for call in ctx.src.calls:
        name = ctx.qualname(call.func)
        if name not in LOSS_FUNCTIONS and dotted(call.func) not in criteria:
            continue
        logits = call.args[0] if call.args else keyword(call, "input")
        if logits is None:
            continue
        dtypes = ctx.flow.tensor_dtype(logits, ctx.src.scope(call))
        if dtypes and dtypes <= FLOAT_UP:
            continue
        if dtypes and dtypes & HALF:
            yield call, f"the loss is computed from {describe(dtypes)} logits; use `{ast.unparse(logits)[:40]}.float()`"
        elif dtypes is None and (cast := _in_half_module(ctx, call)) is not None:
            yield call, (f"the loss is computed from logits of a model cast to {describe(cast.dtypes)} (line {cast.node.lineno}) "
                         f"without autocast; use `{ast.unparse(logits)[:40]}.float()`")


@check("pure-bf16-optimizer", triggers=("bfloat16", "bf16"), also=(("optim",),))
def pure_bf16_optimizer(ctx: Context) -> Iterator[Hit]:
    # B19 (pytorch/ao PR #1124): bf16 weights + plain AdamW: updates below ~1e-3 of a weight round away.
    cast = _cast_model_without_autocast(ctx)
    if cast is None or "bf16" not in cast.dtypes:
        return
    for call, name in calls_named(ctx, PLAIN_OPTIMIZERS):
        if call.lineno > cast.node.lineno:
            yield call, (f"`{name.rsplit('.', 1)[-1]}` updates weights cast to bfloat16 (line {cast.node.lineno}) without fp32 master "
                         "weights; small updates round to nothing")


@check("bf16-to-numpy", triggers=("numpy", "np."), also=(("bfloat16", "bf16"),))
def bf16_to_numpy(ctx: Context) -> Iterator[Hit]:
    # B29 (pytorch #110285): NumPy has no bfloat16; `.numpy()` raises "Got unsupported ScalarType BFloat16".
    for call in ctx.src.calls:
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "numpy" and not call.args and ctx.qualname(func) is None:
            tensor = func.value
        elif (ctx.qualname(func) or "").split(".")[0] == "numpy" and last_identifier(func) in ("asarray", "array") and call.args:
            tensor = call.args[0]
        else:
            continue
        dtypes = ctx.flow.tensor_dtype(tensor, ctx.src.scope(call))
        if dtypes and "bf16" in dtypes:
            yield call, f"`{ast.unparse(tensor)[:50]}` is {describe(dtypes)} and NumPy has no bfloat16; call `.float()` first"

