"""Checks on the training step: gradients, loss, softmax, optimizer, and tensors leaving torch."""

from __future__ import annotations

import ast
from typing import Iterator

from ampdoctor.lint.python.checks import Context, Hit, calls_named, check
from ampdoctor.lint.python.checks.rope import HALF_WORDS, chain_words
from ampdoctor.lint.python.dataflow import HALF, describe
from ampdoctor.lint.python.resolve import dotted, keyword, last_identifier, tokens

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



SQUARES = frozenset({"torch.square"})
VARIANCES = frozenset({"torch.var", "torch.var_mean"})


def _squared(expr: ast.AST, ctx: Context) -> ast.AST | None:
    """The tensor squared in `expr`: ``x.pow(2)``, ``torch.pow(x, 2)``, ``x ** 2``, ``x * x``, ``x.square()``."""
    if isinstance(expr, ast.BinOp):
        two = isinstance(expr.right, ast.Constant) and expr.right.value == 2
        if (isinstance(expr.op, ast.Pow) and two) or (isinstance(expr.op, ast.Mult) and ast.dump(expr.left) == ast.dump(expr.right)):
            return expr.left
        return None
    if not isinstance(expr, ast.Call):
        return None
    name = ctx.qualname(expr.func)
    if name == "torch.pow" and len(expr.args) == 2 and isinstance(expr.args[1], ast.Constant) and expr.args[1].value == 2:
        return expr.args[0]
    if name in SQUARES and expr.args:
        return expr.args[0]
    if name is None and isinstance(expr.func, ast.Attribute):
        if expr.func.attr == "square" and not expr.args:
            return expr.func.value
        if expr.func.attr == "pow" and len(expr.args) == 1 and isinstance(expr.args[0], ast.Constant) and expr.args[0].value == 2:
            return expr.func.value
    return None


def _variance_input(call: ast.Call, ctx: Context) -> ast.AST | None:
    """The tensor whose variance `call` computes by hand: ``x.pow(2).mean(-1)``, ``torch.mean(x * x)``,
    ``(x - mu).pow(2).mean(-1)`` (-> ``x``), ``x.var(-1)``, ``torch.var_mean(x)``; None if it is no such call or
    asks for ``dtype=torch.float32`` itself."""
    name, func = ctx.qualname(call.func), call.func
    if any(kw.arg in ("keepdims", "ddof") for kw in call.keywords):
        return None  # NumPy's spelling: a reference implementation, not a torch norm
    if name is None and isinstance(func, ast.Attribute) and func.attr in ("mean", "var"):
        inner = func.value
    elif name in ("torch.mean", *VARIANCES) and call.args:
        inner = call.args[0]
    else:
        return None
    if name in VARIANCES or (name is None and func.attr == "var"):
        base = inner
    else:
        base = _squared(inner, ctx)
        asked = ctx.flow.dtype_of(keyword(call, "dtype"))
        if base is None or (asked and asked <= FLOAT_UP):
            return None
    if isinstance(base, ast.BinOp) and isinstance(base.op, ast.Sub):
        base = base.left
    return base


def _norm_name(name: str) -> bool:
    """``RMSNorm``, ``QKNorm``, ``rms_norm``, ``LayerNormalization``; not ``Normal`` (distributions)."""
    lower = name.lower()
    return "norm" in lower and ("normal" not in lower or "normaliz" in lower)


def _norm_scope(node: ast.AST, ctx: Context, rsqrt_functions: set[ast.AST]) -> ast.AST | None:
    """The class (or, outside a class, the function) of a norm, None when `node` is not in one: a class named like
    a norm, the ``forward`` of another module that takes an rsqrt, or a function named like a norm or taking an
    rsqrt. (A helper method of an attention class that normalises keys is not a norm layer.)"""
    fn = ctx.src.enclosing_function(node)
    cls = next((a for a in ctx.src.ancestors(node) if isinstance(a, ast.ClassDef)), None)
    if cls is not None:
        if _norm_name(cls.name) or (fn is not None and fn.name == "forward" and fn in rsqrt_functions):
            return cls
        return None
    if fn is not None and (_norm_name(fn.name) or fn in rsqrt_functions):
        return fn
    return None


def _chosen_dtype(expr: ast.AST, ctx: Context, depth: int = 0) -> bool:
    """Was `expr` converted to a dtype chosen at run time before the reduction: ``input.to(computation_dtype)``,
    ``_maybe_convert_to_dtype(a, acc_dtype)``, followed through names, reshapes and views. (A resolved half dtype
    never gets here: the caller reports it first.)"""
    if depth > 4:
        return False
    if isinstance(expr, ast.Call):
        for arg in (*expr.args, *(kw.value for kw in expr.keywords)):
            # `compute_dtype`, `self.acc_dtype`, a `dtype` parameter; not `x.dtype`, which keeps whatever x is
            if isinstance(arg, ast.Name) and "dtype" in tokens(arg.id):
                return True
            if isinstance(arg, ast.Attribute) and arg.attr != "dtype" and "dtype" in tokens(arg.attr):
                return True
        inner = [expr.func.value] if isinstance(expr.func, ast.Attribute) and ctx.qualname(expr.func) is None else []
        return any(_chosen_dtype(e, ctx, depth + 1) for e in (*inner, *expr.args[:1]))
    if isinstance(expr, ast.Subscript):
        return _chosen_dtype(expr.value, ctx, depth + 1)
    if isinstance(expr, ast.BinOp):
        return _chosen_dtype(expr.left, ctx, depth + 1)
    if isinstance(expr, ast.Name):
        before = [b for b in ctx.src.bindings(expr, ctx.src.scope(expr)) if b[0] < expr.lineno]
        return bool(before) and before[-1][1] is not None and _chosen_dtype(before[-1][1], ctx, depth + 1)
    return False


@check("norm-low-precision", triggers=HALF_WORDS, also=(("mean(", "var(", "var_mean("),))
def norm_low_precision(ctx: Context) -> Iterator[Hit]:
    # B23 (sglang PR #27540: Gemma RMSNorm variance in bf16 -> cosine 0.51 at layer 58; transformers PR #25421).
    # An upcast anywhere in the norm's class counts (Gemma: `self._norm(x.float())`), so only norms that never
    # leave the input dtype are reported, and only in a file that shows half precision.
    evidence = ctx.facts.half_evidence
    if evidence is None:
        return
    candidates = [(call, base) for call in ctx.src.calls if (base := _variance_input(call, ctx)) is not None]
    if not candidates:
        return
    rsqrt_functions = {ctx.src.enclosing_function(c) for c in ctx.src.calls if last_identifier(c.func) == "rsqrt"}
    upcast_scopes: set[ast.AST] | None = None
    for call, base in candidates:
        owner = _norm_scope(call, ctx, rsqrt_functions)
        if owner is None:
            continue
        dtypes = ctx.flow.tensor_dtype(base, ctx.src.scope(call))
        if dtypes and dtypes <= FLOAT_UP:
            continue
        if not (dtypes and dtypes & HALF):
            if _chosen_dtype(base, ctx):
                continue
            if upcast_scopes is None:
                upcast_scopes = _upcast_scopes(ctx)
            if owner in upcast_scopes:
                continue
        where = f"`{owner.name}`" if isinstance(owner, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) else "this norm"
        what = describe(dtypes) if dtypes and dtypes & HALF else "the input dtype"
        yield call, (f"{where} computes the variance `{ast.unparse(call)[:50]}` in {what} in a file that runs in half precision "
                     f"(line {evidence.lineno}); upcast first: `x.float().pow(2).mean(-1, keepdim=True)`")


def _upcast_scopes(ctx: Context) -> set[ast.AST]:
    """Classes (or top-level functions) that cast something to fp32/fp64 or ask for ``dtype=torch.float32``."""
    found: set[ast.AST] = set()
    for call in ctx.src.calls:
        dtypes = ctx.flow.cast_dtype(call) or ctx.flow.dtype_of(keyword(call, "dtype"))
        if dtypes and dtypes <= FLOAT_UP:
            cls = next((a for a in ctx.src.ancestors(call) if isinstance(a, ast.ClassDef)), None)
            found.add(cls or ctx.src.enclosing_function(call) or ctx.src.tree)
    return found


PEFT_FUNCTIONS = frozenset({"peft.get_peft_model", "peft.mapping.get_peft_model", "peft.mapping_func.get_peft_model"})


def _peft_wrap(call: ast.Call, ctx: Context) -> bool:
    """``get_peft_model(model, config)``, ``PeftModel.from_pretrained(base, path)``, ``AutoPeftModelFor*.from_pretrained``."""
    name = ctx.qualname(call.func)
    if name in PEFT_FUNCTIONS or (name is None and isinstance(call.func, ast.Name) and call.func.id == "get_peft_model"):
        return True
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "from_pretrained":
        owner = last_identifier(func.value) or ""
        return owner.startswith(("PeftModel", "AutoPeftModel")) and (name is None or name.startswith("peft."))
    return False


@check("adapter-dtype-mismatch", triggers=("get_peft_model", "PeftModel"), also=(("bfloat16", "float16", "half()", "torch.half", "bf16", "fp16"),))
def adapter_dtype_mismatch(ctx: Context) -> Iterator[Hit]:
    # B27 (peft PR #1706, #2421, #971): PEFT keeps adapters fp32; casting the wrapped model afterwards casts the
    # trainable adapters too and, with kept-fp32 modules, leaves mixed dtypes that only autocast reconciles.
    if ctx.facts.mixed_precision:
        return  # under autocast the matmuls take mixed dtypes; a file that sets it up is left alone
    wraps: dict[tuple[str, ast.AST], int] = {}
    for call in ctx.src.calls:
        if not _peft_wrap(call, ctx):
            continue
        parent = ctx.src.parents.get(call)
        if isinstance(parent, ast.Attribute):
            cast = ctx.src.parents.get(parent)
            if isinstance(cast, ast.Call) and cast.func is parent and (dtypes := _half_cast(cast, ctx)):
                yield cast, _adapter_message(dtypes, call)
        elif isinstance(parent, ast.Assign) and len(parent.targets) == 1 and (target := dotted(parent.targets[0])):
            key = (target, ctx.src.tree if "." in target else ctx.src.scope(call))
            wraps.setdefault(key, call.lineno)
    if not wraps:
        return
    for call in ctx.src.calls:
        func = call.func
        if not isinstance(func, ast.Attribute) or func.attr not in ("to", "half", "bfloat16"):
            continue
        target = dotted(func.value)
        if target is None:
            continue
        line = wraps.get((target, ctx.src.tree if "." in target else ctx.src.scope(call)))
        if line is not None and call.lineno > line and (dtypes := _half_cast(call, ctx)):
            yield call, _adapter_message(dtypes, line)


def _half_cast(call: ast.Call, ctx: Context) -> frozenset | None:
    dtypes = ctx.flow.cast_dtype(call, ctx.src.scope(call))
    return dtypes & HALF if dtypes and dtypes & HALF else None


def _adapter_message(dtypes: frozenset, wrapped: ast.AST | int) -> str:
    line = wrapped if isinstance(wrapped, int) else wrapped.lineno
    return (f"the PEFT model (line {line}) is cast to {describe(dtypes)} after its adapters were added: the trainable adapters "
            f"leave fp32 and the forward runs without autocast; load the base with `torch_dtype=` before `get_peft_model`")
