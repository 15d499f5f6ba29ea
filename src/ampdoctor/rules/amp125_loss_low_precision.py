"""AMP125 loss-low-precision: The loss is computed from bf16/fp16 logits.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP125`)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

from ampdoctor.audit.evidence import Tag
from ampdoctor.core.model import Severity
from ampdoctor.core.registry import Hit, code_check, runtime_check
from ampdoctor.dtypes import name_of
from ampdoctor.lint.python.context import FLOAT_UP, HALF_WORDS, CodeHit, Context, calls_named, in_class, in_half_module
from ampdoctor.lint.python.dataflow import HALF, PRESERVING, describe
from ampdoctor.lint.python.facts import AUTOCASTS, ModelCast, disables_autocast, hands_to_deepspeed
from ampdoctor.lint.python.resolve import dotted, keyword, last_identifier, method, tokens

if TYPE_CHECKING:
    from ampdoctor.audit.analysis import RuntimeContext

LOSS_FUNCTIONS = frozenset({
    "torch.nn.functional.cross_entropy", "torch.nn.functional.nll_loss", "torch.nn.functional.binary_cross_entropy_with_logits",
    "torch.nn.functional.kl_div",
})


LOSS_CLASSES = frozenset({"torch.nn.CrossEntropyLoss", "torch.nn.NLLLoss", "torch.nn.BCEWithLogitsLoss", "torch.nn.KLDivLoss"})

_LOG_SOFTMAX_CALLS = frozenset({"torch.log_softmax", "torch.nn.functional.log_softmax"})


def _shown(logits: ast.expr, limit: int = 40) -> str:
    """The logits as the message writes them: the whole expression where it is short, else the tensor it reshapes or
    indexes (``shift_logits`` of ``shift_logits.view(-1, shift_logits.size(-1))``), whose upcast is the same fix; never
    an expression cut in the middle."""
    node = logits
    while len(ast.unparse(node)) > limit:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            node = node.func.value
        elif isinstance(node, (ast.Subscript, ast.Attribute)):
            node = node.value
        else:
            return ast.unparse(logits)
    return ast.unparse(node)


@code_check("AMP125", triggers=HALF_WORDS, also=(("cross_entropy", "nll_loss", "Loss", "kl_div", "binary_cross_entropy", "log_softmax",
                                                   "log_prob", "logprob", "logps"),), project=True)
def loss_low_precision(ctx: Context) -> Iterator[CodeHit]:
    # Modalities PR #464: the loss of a half model without `.float()` is quantized to the bf16 grid.
    if ctx.facts.mixed_precision_on or ctx.project.autocast is not None:
        # Under autocast the loss is fp32: nll_loss and an explicit log_softmax are upcast. `F.cross_entropy` of half
        # logits is the exception on CUDA (its log_softmax keeps the logits' dtype; seen on an H100), a rounding of
        # the log-probabilities to 8 bits, not a quantized loss: the run-time audit reports it, the lint does not
        # guess it from every `cross_entropy` under autocast.
        return
    yield from _log_probs_of_half_logits(ctx)
    criteria = _criteria(ctx)
    for call in ctx.src.calls:
        name = ctx.qualname(call.func)
        if name not in LOSS_FUNCTIONS and dotted(call.func) not in criteria:
            continue
        logits = _loss_input(ctx, call, name)
        if logits is None:
            continue
        message = _half_logits(ctx, call, logits)
        if message:
            yield call, f"{message}; use `{_shown(logits)}.float()`"


def _criteria(ctx: Context) -> set[str]:
    """The names the file binds a loss module to (``loss_fct = CrossEntropyLoss()``, ``self.criterion = ...``): calls
    of them compute a loss. A target no dotted name spells (``losses[k] = ...``) names no call."""
    return {name for node in ctx.src.assigns if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
            and ctx.qualname(_unmoved(ctx, node.value).func) in LOSS_CLASSES for t in node.targets if (name := dotted(t)) is not None}


def _unmoved(ctx: Context, call: ast.Call) -> ast.Call:
    """The construction a module is moved from: ``nn.CrossEntropyLoss().cuda()`` and ``.to(device)`` move a loss
    module (its weights, if any), they do not make another kind of callable."""
    while isinstance(call.func, ast.Attribute) and call.func.attr in ("cuda", "to", "cpu") and ctx.qualname(call.func) is None \
            and isinstance(call.func.value, ast.Call):
        call = call.func.value
    return call


def _log_probs_of_half_logits(ctx: Context) -> Iterator[CodeHit]:
    """Log-probabilities taken of the logits a half model returned (``log_softmax(out.logits)``,
    ``log_probs_from_logits(output["logits"], ...)``): in bf16 they keep 8 bits, and the policy ratios and KL terms
    of RL fine-tuning, differences of such numbers, are mostly rounding (OpenRLHF PR #634)."""
    for call in ctx.src.calls:
        logits = _log_probs_input(ctx, call)
        if logits is None or keyword(call, "dtype") is not None:
            continue
        cast = _half_model_output(ctx, logits, ctx.src.scope(call))
        if cast is not None and not _into_promoted_loss(ctx, call):  # (a search of every call: asked last)
            yield call, (f"log-probabilities are taken of the logits of `{cast.name}`, which is {describe(cast.dtypes)} (line "
                         f"{cast.node.lineno}) with no autocast: they keep {describe(cast.dtypes)}'s precision; use "
                         f"`{_shown(logits)}.float()`")


def _into_promoted_loss(ctx: Context, call: ast.Call) -> bool:
    """The log-probabilities, bound to a name, are the input of a loss that an fp32 target promotes (``F.kl_div(
    log_probs, target.float())``): what they are compared with is fp32, and so is the loss."""
    bound = ctx.src.parents.get(call)
    if not (isinstance(bound, ast.Assign) and len(bound.targets) == 1 and isinstance(bound.targets[0], ast.Name)):
        return False
    name = bound.targets[0].id
    for other in ctx.src.calls:
        loss = ctx.qualname(other.func)
        first = other.args[0] if other.args else keyword(other, "input")
        if loss in _FLOAT_TARGETS and isinstance(first, ast.Name) and first.id == name and _promoted(ctx, other, loss):
            return True
    return False


def _log_probs_input(ctx: Context, call: ast.Call) -> ast.AST | None:
    """The logits a call takes log-probabilities of: the first argument of ``F.log_softmax(x, -1)`` or of a helper
    named for it (``log_probs_from_logits(x, y)``, ``selective_log_softmax(x, ids)``), or the receiver of the method
    ``x.log_softmax(-1)``."""
    receiver = _log_softmax_receiver(ctx, call)
    if receiver is not None:
        return receiver
    return call.args[0] if call.args and _takes_log_probs(ctx, call) else None


def _log_softmax_receiver(ctx: Context, call: ast.Call) -> ast.AST | None:
    """``x.log_softmax(-1)`` -> x, on a tensor the imports do not name."""
    if ctx.qualname(call.func) is None and isinstance(call.func, ast.Attribute) and call.func.attr == "log_softmax":
        return call.func.value
    return None


@code_check("AMP125", triggers=("autocast",), also=(("log_softmax", "cross_entropy", "nll_loss", "kl_div", "binary_cross_entropy"),))
def log_probs_after_autocast(ctx: Context) -> Iterator[CodeHit]:
    """``with autocast_ctx: out = model(x)`` and then, below the block, ``F.log_softmax(out.logits, -1)``: the model
    ran under half autocast, so its logits are half, and the log-softmax, out of autocast, keeps their precision
    (autocast would have run it in fp32). minimind's PPO took the new policy's log-probabilities this way while the
    rollout's old ones came from inside autocast: the ratio was off before any update."""
    for call in ctx.src.calls:
        logits = _log_softmax_input(ctx, call)
        if logits is None or keyword(call, "dtype") is not None or _autocast_block(ctx, call) is not None:
            continue
        root = _half_root(ctx, logits)
        if root is None:
            continue
        scope = ctx.src.scope(call)
        before = [(line, value) for line, value in ctx.src.bindings(root, scope) if line < call.lineno]
        value = before[-1][1] if before else None
        if not isinstance(value, ast.Call) or (ctx.qualname(value.func) or "").startswith("torch."):
            continue
        bound = ctx.flow.tensor_dtype(value, scope)
        if bound and bound <= FLOAT_UP:
            continue  # upcast where it is bound (`logits = model(x).float()` inside the block)
        block = _autocast_block(ctx, value)
        if block is None or _returns_fp32_under_autocast(ctx, value) or _accelerate_returns_fp32(ctx, value, block):
            continue
        yield _below_the_block(ctx, call, logits, root, block)


def _below_the_block(ctx: Context, call: ast.Call, logits: ast.AST, root: ast.Name, block: ast.With) -> tuple:
    """`log_probs_after_autocast`'s hit: a warning, or a note in a model's forward where a training config autocasts
    around it."""
    what = "log-probabilities are taken" if "log_softmax" in ast.unparse(call.func) else "the loss is computed"
    message = (f"{what} of `{_shown(logits)}` outside autocast, but `{root.id}` was "
               f"computed under the autocast of line {block.lineno}: its logits are half, and this call keeps "
               f"their precision (inside the block autocast runs it in fp32); call it inside the block or on "
               f"`{_shown(logits)}.float()`")
    outer = ctx.project.config_autocast
    fn = ctx.src.enclosing_function(call)
    if outer is None or fn is None or fn.name != "forward":
        return call, message
    # Leaving a nested autocast returns to the enclosing one. Every framework whose config autocasts (Lightning around
    # the training step, accelerate and the HF Trainer around the prepared model's forward, DeepSpeed's torch_autocast
    # around the engine's) has a module's forward under it in training: back under it after the block, this call
    # runs in fp32. Code of a training loop outside a forward is under none of accelerate's.
    return call, (f"{message}. A note: {outer.describe()} runs the model's forward under autocast in training, "
                  "and leaving the block returns to it, which computes this in fp32; only a call outside training "
                  "keeps half"), Severity.INFO


# Ops autocast runs in fp32 whatever their input (its fp32 list): a model whose forward ends in one returns fp32.
_FP32_UNDER_AUTOCAST = frozenset({"log_softmax", "softmax", "layer_norm", "group_norm", "nll_loss", "cross_entropy", "exp",
                                  "log", "norm", "cumsum", "sum", "mse_loss", "l1_loss", "binary_cross_entropy_with_logits"})


def _returns_fp32_under_autocast(ctx: Context, value: ast.Call) -> bool:
    """``model(x)`` of a class this file defines whose ``forward`` returns only what an op on autocast's fp32 list
    made (``return F.log_softmax(x, dim=1)``, or a name last bound so): under autocast that output is fp32. A model
    handed in as a parameter (``def train(model, loader)``) is taken to be the one module class the file defines."""
    name = ctx.facts.class_of(value.func)
    modules = [c for c in ctx.src.classes if method(c, "forward") is not None]
    if name is None and ctx.src.is_parameter(value.func) and len(modules) == 1:
        name = modules[0].name
    cls = next((c for c in ctx.src.classes if c.name == name), None)
    forward = method(cls, "forward") if cls else None
    returns = [r.value for r in ast.walk(forward) if isinstance(r, ast.Return) and r.value is not None] if forward else []
    return bool(returns) and all(_fp32_op(ctx, r, forward) for r in returns)


def _fp32_op(ctx: Context, expr: ast.AST, fn: ast.FunctionDef) -> bool:
    if isinstance(expr, ast.Name):
        bound = [v for line, v in ctx.src.bindings(expr, fn) if line < expr.lineno and v is not None]
        return bool(bound) and _fp32_op(ctx, bound[-1], fn)
    return isinstance(expr, ast.Call) and (last_identifier(expr.func) or "") in _FP32_UNDER_AUTOCAST


def _log_softmax_input(ctx: Context, call: ast.Call) -> ast.AST | None:
    """The tensor a log-softmax is taken of: ``F.log_softmax(x, -1)``, ``torch.log_softmax(x, -1)``,
    ``x.log_softmax(-1)``, or the input of a loss function that takes one (``F.cross_entropy(logits, y)``), unless
    an fp32 target promotes it (`_promoted`)."""
    name = ctx.qualname(call.func)
    if name in _LOG_SOFTMAX_CALLS:
        return call.args[0] if call.args else keyword(call, "input")
    if name in LOSS_FUNCTIONS:
        return _loss_input(ctx, call, name)
    return _log_softmax_receiver(ctx, call)


def _half_root(ctx: Context, expr: ast.AST) -> ast.Name | None:
    """The name an expression reads through indexing, attributes (``out.logits``) and dtype-keeping methods; None
    where a cast on the way (``.float()``, ``.to(torch.float32)``) or anything else decides the dtype."""
    for _ in range(16):
        if isinstance(expr, ast.Name):
            return expr
        if isinstance(expr, (ast.Subscript, ast.Attribute)):
            expr = expr.value
        elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and ctx.qualname(expr.func) is None \
                and expr.func.attr in PRESERVING and expr.func.attr not in ("cpu", "cuda"):
            expr = expr.func.value
        else:
            return None
    return None


def _enters_half_autocast(ctx: Context, expr: ast.AST) -> bool:
    """A ``with`` item that turns half autocast on: an autocast call that does not disable it, or a context object
    named after autocast (``with autocast_ctx:``, ``with self.amp_autocast:``), as training scripts pass them round."""
    if isinstance(expr, ast.Call):
        if ctx.qualname(expr.func) in AUTOCASTS or "autocast" in tokens(last_identifier(expr.func) or ""):
            return not disables_autocast(expr, ctx.src)
        return False
    return isinstance(expr, (ast.Name, ast.Attribute)) and "autocast" in tokens(last_identifier(expr) or "")


_ACCELERATOR = frozenset({"accelerate.Accelerator"})


def _accelerate_returns_fp32(ctx: Context, value: ast.Call, block: ast.With) -> bool:
    """A model that accelerate prepared returns fp32 where its mixed precision is on: `prepare` wraps the forward in
    accelerate's autocast and then in `convert_outputs_to_fp32`. Called under ``accelerator.autocast()``, which
    autocasts only where that mixed precision is on, or in a file that turns it on, its logits are fp32."""
    accelerators = [c for c, _ in calls_named(ctx, _ACCELERATOR)]
    # handed to DeepSpeed, accelerate leaves the precision to its engine, autocasts nothing and converts nothing
    if dotted(value.func) not in ctx.facts.prepared_names or not accelerators or any(hands_to_deepspeed(c) for c in accelerators):
        return False
    entered = [i.context_expr for i in block.items]
    if any(isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr == "autocast" and ctx.qualname(e.func) is None
           for e in entered):
        return True
    return any(n in accelerators for n in ctx.facts.mixed_precision_on)


def _autocast_block(ctx: Context, node: ast.AST) -> ast.With | None:
    """The ``with`` block of half autocast that `node` runs in, in its own function."""
    for parent, child in ctx.src.steps(node):
        if isinstance(parent, ast.With) and child in parent.body and any(_enters_half_autocast(ctx, i.context_expr) for i in parent.items):
            return parent
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return None
    return None


def _loss_input(ctx: Context, call: ast.Call, name: str | None) -> ast.AST | None:
    """The logits a loss function takes (its first argument, or `input=`), unless an fp32 target promotes them
    (`_promoted`): then the loss is computed in fp32 whatever they are."""
    if _promoted(ctx, call, name):
        return None
    return call.args[0] if call.args else keyword(call, "input")


def _takes_log_probs(ctx: Context, call: ast.Call) -> bool:
    name = ctx.qualname(call.func)
    if name in _LOG_SOFTMAX_CALLS:
        return True
    words = tokens(last_identifier(call.func) or "")
    return bool({"logprob", "logprobs", "logps"} & words or {"log", "logp"} & words and {"prob", "probs", "p", "softmax"} & words)


def _half_model_output(ctx: Context, expr: ast.AST, scope: ast.AST, depth: int = 0) -> ModelCast | None:
    """The half model (a cast or a half `from_pretrained` bound to a name) whose call produced `expr`, through
    indexing, `.logits` and names; None when the value is upcast on the way or comes from elsewhere."""
    if depth > 4:
        return None
    if isinstance(expr, ast.Subscript) or (isinstance(expr, ast.Attribute) and expr.attr == "logits"):
        if _rebound_up(ctx, expr, scope):
            return None
        return _half_model_output(ctx, expr.value, scope, depth + 1)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Div, ast.Mult)) and _python_number(ctx, expr.right, scope):
        return _half_model_output(ctx, expr.left, scope, depth + 1)  # `logits / temperature` keeps the logits' dtype
    if isinstance(expr, ast.Name):
        for _, value in ctx.src.bindings(expr, scope):
            found = _half_model_output(ctx, value, scope, depth + 1) if value is not None else None
            if found is not None:
                return found
        return None
    if isinstance(expr, ast.Call):
        callee = dotted(expr.func)
        return next((c for c in ctx.facts.model_casts if c.name and c.name == callee), None)
    return None


def _rebound_up(ctx: Context, expr: ast.Subscript | ast.Attribute, scope: ast.AST) -> bool:
    """An item or attribute of the output rebound to an fp32 copy above the use, in the same function
    (``output["logits"] = output["logits"].to(torch.float32)``, ``out.logits = out.logits.float()``): what is read
    there below is fp32, whatever the model returned."""
    text = ast.unparse(expr)
    for node in ctx.src.assigns:
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and node.lineno < expr.lineno):
            continue
        if any(ast.unparse(t) == text for t in node.targets) and ctx.src.scope(node) is scope \
                and (ctx.flow.cast_dtype(node.value) or frozenset()) & FLOAT_UP:
            return True
    return False


# Names of the numbers logits are scaled by before a softmax: a Python float keeps a tensor's dtype.
_SCALARS = frozenset({"temperature", "temp", "tau", "scale"})


def _python_number(ctx: Context, expr: ast.AST, scope: ast.AST) -> bool:
    """A number, not a tensor: a literal, or a name or attribute named as a temperature or scale that no tensor
    factory made in this scope (an fp32 tensor would promote the logits)."""
    if isinstance(expr, ast.Constant):
        return isinstance(expr.value, (int, float)) and not isinstance(expr.value, bool)
    ident = last_identifier(expr) if isinstance(expr, (ast.Name, ast.Attribute)) else None
    if not ident or not tokens(ident) & _SCALARS:
        return False
    return not any(isinstance(v, ast.Call) and (ctx.qualname(v.func) or "").startswith("torch.") for _, v in ctx.src.bindings(expr, scope))


# Losses whose target is a float tensor of the input's shape: an fp32 target promotes a half input, and the loss is
# computed in fp32 (type promotion, as for any binary op). cross_entropy/nll_loss take class indices: no promotion.
_FLOAT_TARGETS = frozenset({"torch.nn.functional.kl_div", "torch.nn.functional.binary_cross_entropy_with_logits"})


def _promoted(ctx: Context, call: ast.Call, name: str | None) -> bool:
    if name not in _FLOAT_TARGETS:
        return False
    target = call.args[1] if len(call.args) > 1 else keyword(call, "target")
    found = ctx.flow.tensor_dtype(target, ctx.src.scope(call)) if target is not None else None
    return bool(found) and found <= FLOAT_UP


def _half_logits(ctx: Context, call: ast.Call, logits: ast.AST) -> str | None:
    """Why the logits are half, when they are, as the message's first half."""
    dtypes = ctx.flow.tensor_dtype(logits, ctx.src.scope(call))
    if dtypes and dtypes <= FLOAT_UP:
        return None
    if dtypes and dtypes & HALF:
        return f"the loss is computed from {describe(dtypes)} logits"
    if (cast := in_half_module(ctx, call)) is not None and ctx.facts.fp32_head is None:
        return f"the loss is computed from logits of a model cast to {describe(cast.dtypes)} (line {cast.node.lineno}) without autocast"
    project = ctx.half_model_at(call)
    if project is not None and in_class(ctx, call) and not _upcast_logits(ctx, logits):
        return f"the loss is computed from logits of this model, which the project runs as {project.describe()}"
    return None


def _upcast_logits(ctx: Context, logits: ast.AST) -> bool:
    """The model casts its own logits up somewhere (``logits = self.lm_head(x).float()``)."""
    name = ast.unparse(logits)
    for call in ctx.src.calls:
        if (ctx.flow.cast_dtype(call) or frozenset()) & FLOAT_UP:
            parent = ctx.src.parents.get(call)
            if isinstance(parent, ast.Assign) and any(ast.unparse(t) == name for t in parent.targets):
                return True
    return False


_THROUGH = ("aten::_to_copy", "aten::view", "aten::squeeze", "aten::clone", "aten::detach")


@runtime_check("AMP125")
def half_loss(ctx: RuntimeContext) -> Iterator[Hit]:
    """The loss backward starts from, followed back through casts and views to the op that computed it."""
    t = ctx.trace
    for op in t.tagged(Tag.LOSS):
        prod, dtype = op.extra[1], op.extra[2]
        real = prod
        while real is not None and real >= 0 and t.op(real) in _THROUGH:
            real = next((p for p in t.op_at(real).producers if p is not None), None)
        real_dt = t.out_dtype(real) if real is not None and real >= 0 else dtype
        if dtype in ctx.HALF or real_dt in ctx.HALF:
            maker = t.op(real) if real is not None and real >= 0 else "an op outside the audit"
            yield Hit(f"the loss is computed in {name_of(real_dt)} by {maker}" + (f" (then cast to {name_of(dtype)})" if dtype != real_dt else "")
                      + ": its value and gradient are quantized", t.location(real if real is not None and real >= 0 else op.seq))
        elif (s := ctx.loss_log_probs) is not None:
            yield _half_log_probs(ctx, s, name_of(real_dt))
        return


def _half_log_probs(ctx: RuntimeContext, s: int, loss_dtype: str) -> Hit:
    """An fp32 loss built from log-probabilities taken in half precision (OpenRLHF PR #634: a bf16 model's
    log_softmax, then ratios and KL terms in fp32 by promotion with fp32 advantages): the loss's dtype hides that
    what it is made of keeps 8 bits. Under autocast, where that device's autocast keeps it half (see
    `RuntimeContext.loss_log_probs`)."""
    t = ctx.trace
    upcast = ctx.autocast_upcast(s) if t.out_dtype(s) not in ctx.HALF else None
    dt = name_of(upcast if upcast is not None else t.out_dtype(s))
    if upcast is not None:
        return Hit(f"the loss is {loss_dtype}, made by `F.cross_entropy` of {dt} logits: this run's CPU autocast upcast the "
                   f"whole cross_entropy, but CUDA autocast keeps its log_softmax in the logits' dtype (cross_entropy passes "
                   f"that dtype on), so on CUDA the loss and its gradient come from {dt} log-probabilities; compute the loss "
                   "of `logits.float()`", t.location(s), details={"dtype": dt, "autocast": True, "judged_for": "cuda"})
    if t.op_at(s).autocast and ctx.ran_on == "cuda":
        how = (f"under CUDA autocast, which keeps `F.cross_entropy`'s log_softmax in the logits' dtype (it passes that "
               f"dtype on): the loss and its gradient come from {dt} log-probabilities; compute the loss of `logits.float()`")
    elif t.op_at(s).autocast:
        how = (f"under {ctx.ran_on.upper()} autocast, which keeps log_softmax in its input's dtype: the loss and its "
               f"gradient come from {dt} log-probabilities; take them of `logits.float()`")
    else:
        how = (f"outside autocast: they keep {dt}'s precision, and ratios or differences of them are mostly rounding; take "
               "them of `logits.float()`")
    return Hit(f"the loss is {loss_dtype} but is made from log-probabilities that {t.op(s)} took in {dt} of {dt} logits, {how}",
               t.location(s), details={"dtype": dt, "autocast": bool(t.op_at(s).autocast)})
