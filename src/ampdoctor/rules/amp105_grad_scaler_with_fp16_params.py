"""AMP105 grad-scaler-with-fp16-params: A GradScaler unscales gradients of parameters that are themselves fp16.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP105`)."""

from __future__ import annotations

import ast
from typing import Iterator

from ampdoctor.core.engine import Places
from ampdoctor.core.registry import Hit, code_check, policy_check
from ampdoctor.dtypes import FP16
from ampdoctor.facts import RunFacts
from ampdoctor.lint.python.context import GRAD_SCALERS, CodeHit, Context, calls_named
from ampdoctor.lint.python.resolve import dotted, tokens
from ampdoctor.policy import Policy


@policy_check("AMP105")
def grad_scaler_with_fp16_params(policy: Policy | None, facts: RunFacts, at: Places) -> Iterator[Hit]:
    # GradScaler.unscale_ refuses fp16 gradients ("Attempting to unscale FP16 gradients.").
    if policy is None or policy.loss_scale == "none" or policy.grads != FP16 or facts.adapters_only or facts.trains is False:
        return
    here = at("loss_scale")
    yield Hit("a GradScaler unscales gradients of fp16 weights: 'ValueError: Attempting to unscale FP16 gradients.'",
              here, related=at.others(here, "params"))


@code_check("AMP105", triggers=("add_adapter",), also=(("float16", "fp16", ".half()"),))
def adapters_made_in_fp16(ctx: Context) -> Iterator[CodeHit]:
    # diffusers PR #6119: a model cast to a dtype that is fp16 on the fp16 path, then given adapters:
    # PEFT creates them in their base layer's dtype, so the only trainable weights are fp16 and the fp16 run's
    # GradScaler refuses their gradients, unless they are upcast to fp32 before training.
    if not _loss_scaled(ctx):
        return
    casts = _fp16_casts(ctx)
    reported: set[ast.Call] = set()
    for call in ctx.src.calls:
        model = _adapted_model(ctx, call)
        cast = casts.get((model, ctx.src.enclosing_function(call))) if model else None
        if cast is None or cast.lineno >= call.lineno:
            continue
        upcast, gate = _upcast_after(ctx, call, model)
        if upcast is None:
            yield call, (f"adapters are added to `{model}` after it was cast to fp16 on the fp16 path (line {cast.lineno}): they "
                         "are created in that dtype, so the trainable weights are fp16 and the fp16 run's GradScaler fails with "
                         "'Attempting to unscale FP16 gradients'; upcast the trainable parameters to fp32 after adding them")
            continue
        if gate is not None and upcast not in reported:
            reported.add(upcast)
            yield upcast, (f"this fp32 upcast of the trainable parameters runs only when `{ast.unparse(gate.test)[:50]}` (line "
                           f"{gate.lineno}), which is not the fp16 path: otherwise the adapters added to `{model}` (line "
                           f"{call.lineno}) after its fp16 cast (line {cast.lineno}) stay fp16 and the fp16 run's GradScaler "
                           "fails with 'Attempting to unscale FP16 gradients'; upcast them whatever that flag says")


def _loss_scaled(ctx: Context) -> bool:
    """A GradScaler, or a framework whose fp16 mixed precision brings one (accelerate, the HF Trainer, Lightning)."""
    if next(calls_named(ctx, GRAD_SCALERS), None) is not None:
        return True
    return any(kw.arg in ("mixed_precision", "fp16", "precision") for call in ctx.src.calls for kw in call.keywords
               if isinstance(call.func, (ast.Name, ast.Attribute)) and (dotted(call.func) or "").rsplit(".", 1)[-1]
               in ("Accelerator", "TrainingArguments", "Trainer", "Fabric"))


def _fp16_casts(ctx: Context) -> dict[tuple[str, ast.AST | None], ast.Call]:
    """The first cast of each model name (``unet.to(device, dtype=weight_dtype)``, ``model.half()``) whose dtype can
    be fp16, by the function it is in."""
    out: dict[tuple[str, ast.AST | None], ast.Call] = {}
    for call in ctx.src.calls:
        func = call.func
        if not isinstance(func, ast.Attribute) or func.attr not in ("to", "half"):
            continue
        dtypes = ctx.flow.cast_dtype(call, ctx.src.scope(call))
        name = dotted(func.value)
        if name and dtypes and FP16 in dtypes:
            out.setdefault((name, ctx.src.enclosing_function(call)), call)
    return out


def _starts_training(ctx: Context, call: ast.Call) -> bool:
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in ("prepare", "backward"):
        return True
    return (ctx.qualname(func) or "").startswith("torch.optim.")


def _adapted_model(ctx: Context, call: ast.Call) -> str | None:
    """``unet.add_adapter(config)`` -> "unet". (`get_peft_model` is left out: since PEFT 0.12 it upcasts half
    adapters to fp32 itself, `autocast_adapter_dtype=True`; the models' `add_adapter` does not.)"""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "add_adapter":
        return dotted(func.value)
    return None


def _upcast_after(ctx: Context, call: ast.Call, model: str) -> tuple[ast.Call | None, ast.If | None]:
    """Below the call in its function and before training starts (an optimizer is built, the model prepared, a
    backward run): an fp32 cast of parameters (``param.data = param.to(torch.float32)``,
    ``cast_training_params(unet)``) or of the model itself, the first that runs on every path through the function's
    non-precision conditions, else the first with the ``if`` that gates it. (A cast back to fp32 for saving comes too
    late.)"""
    fn = ctx.src.enclosing_function(call)
    later = sorted((c for c in ctx.src.calls if c.lineno > call.lineno and ctx.src.enclosing_function(c) is fn), key=lambda c: c.lineno)
    found: list[ast.Call] = []
    for other in later:
        if _starts_training(ctx, other):
            break
        func = other.func
        if (dotted(func) or "").rsplit(".", 1)[-1] == "cast_training_params":
            found.append(other)
        elif isinstance(func, ast.Attribute) and func.attr in ("to", "float"):
            receiver = dotted(func.value) or ""
            if (receiver == model or "param" in receiver) and ctx.flow.cast_dtype(other, ctx.src.scope(other)) == {"fp32"}:
                found.append(other)
    gates = [(c, _unrelated_gate(ctx, c, call, found)) for c in found]
    return next(((c, g) for c, g in gates if g is None), gates[0] if gates else (None, None))


# Words of a condition about the precision (``if args.mixed_precision != "no"``, ``if use_amp``): an upcast gated by
# one runs on the fp16 path.
_PRECISION_WORDS = frozenset({"precision", "fp16", "bf16", "float16", "bfloat16", "half", "dtype", "amp", "mixed", "fp32", "float32"})


def _unrelated_gate(ctx: Context, upcast: ast.Call, adapted: ast.Call, others: list[ast.Call] = ()) -> ast.If | None:
    """The innermost ``if`` that gates `upcast` but not `adapted` on a flag that says nothing about the precision
    (``if args.train_text_encoder:``): the fp16 path can skip the upcast, unless another of the upcasts (`others`)
    runs on the other side of that ``if``. A test of a loop's own item (``if param.requires_grad:`` inside ``for
    param in ...``) filters what is upcast, it gates no path."""
    around = set(ctx.src.ancestors(adapted))
    # the adapters were themselves added under that test: the upcast gated by it runs whenever they exist
    same = {ast.dump(node.test) for node in around if isinstance(node, ast.If)}
    loop_names = {t.id for node in ctx.src.ancestors(upcast) if isinstance(node, (ast.For, ast.comprehension))
                  for t in ast.walk(node.target) if isinstance(t, ast.Name)}
    for node in ctx.src.ancestors(upcast):
        if node in around or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            break
        if not isinstance(node, ast.If) or not _unrelated_test(ctx, node, loop_names, same):
            continue
        side = _inside(ctx, upcast, node.body)
        if any(_inside(ctx, other, node.orelse if side else node.body) for other in others if other is not upcast):
            continue
        return node
    return None


def _unrelated_test(ctx: Context, node: ast.If, loop_names: set[str], same: set[str]) -> bool:
    """An ``if`` test that says nothing of the precision, of a loop's item, or of the adapters' own condition."""
    names = {n.id for n in ast.walk(node.test) if isinstance(n, ast.Name)}
    words = {w for n in ast.walk(node.test) for w in _words(n)}
    if names & loop_names or words & _PRECISION_WORDS or ast.dump(node.test) in same:
        return False
    return ctx.flow.fp16_polarity(node.test, ctx.src.scope(node)) == 0


def _inside(ctx: Context, node: ast.AST, block: list[ast.stmt]) -> bool:
    return any(a in block for a in ctx.src.ancestors(node))


def _words(node: ast.AST) -> frozenset[str]:
    if isinstance(node, ast.Name):
        return tokens(node.id)
    if isinstance(node, ast.Attribute):
        return tokens(node.attr)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return tokens(node.value)
    return frozenset()
