"""AMP105 grad-scaler-with-fp16-params: A GradScaler unscales gradients of parameters that are themselves fp16.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP105`)."""

from __future__ import annotations

import ast
from typing import Iterator

from ampdoctor.core.engine import Places
from ampdoctor.core.model import Severity
from ampdoctor.core.registry import Hit, code_check, policy_check
from ampdoctor.dtypes import FP16
from ampdoctor.facts import RunFacts
from ampdoctor.lint.python.context import GRAD_SCALERS, CodeHit, Context, calls_named
from ampdoctor.lint.python.resolve import dotted, node_words, tokens
from ampdoctor.policy import Policy


@policy_check("AMP105")
def grad_scaler_with_fp16_params(policy: Policy | None, facts: RunFacts, at: Places) -> Iterator[Hit]:
    # GradScaler.unscale_ refuses fp16 gradients ("Attempting to unscale FP16 gradients.").
    if policy is None or policy.loss_scale == "none" or policy.grads != FP16 or facts.adapters_only or facts.trains is False:
        return
    here = at("loss_scale")
    if facts.master_weights == "launch":
        # `lint.configs._launched_with_masters`: the project keeps a DeepSpeed or FSDP launch config beside this run.
        # Started with it, no GradScaler meets an fp16 gradient: DeepSpeed's engine scales the loss itself and steps
        # fp32 master partitions; accelerate's FSDP preparation upcasts the trainable parameters to fp32.
        launch = at("master_weights")
        yield Hit("if this run is started without a DeepSpeed or FSDP launch config (the project keeps one at "
                  f"{launch.file}), the fp16 run's GradScaler unscales gradients of fp16 weights: 'ValueError: Attempting to "
                  "unscale FP16 gradients.'; started with it, DeepSpeed scales the loss itself and keeps fp32 masters (FSDP "
                  "upcasts the trainable weights), and nothing fails", here, related=at.others(here, "params", launch),
                  severity=Severity.WARNING)
        return
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
    return next(_precision_settings(ctx), None) is not None


# Frameworks whose fp16 mixed precision brings a loss scaler, and the keywords that set it.
_SCALING_FRAMEWORKS = frozenset({"Accelerator", "TrainingArguments", "Trainer", "Fabric"})
_PRECISION_KEYWORDS = frozenset({"mixed_precision", "fp16", "precision"})


def _precision_settings(ctx: Context) -> Iterator[tuple[ast.Call, list[ast.expr]]]:
    """Each call of such a framework that sets its precision, with the values it is given."""
    for call in ctx.src.calls:
        if isinstance(call.func, (ast.Name, ast.Attribute)) and (dotted(call.func) or "").rsplit(".", 1)[-1] in _SCALING_FRAMEWORKS:
            given = [kw.value for kw in call.keywords if kw.arg in _PRECISION_KEYWORDS]
            if given:
                yield call, given


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
    later = sorted((c for c in ctx.src.calls_in(fn) if c.lineno > call.lineno), key=lambda c: c.lineno)
    found, trains = _upcasts_before_training(ctx, later, model, named=False)
    if not found and not trains and model.startswith("self."):
        found = _upcasts_in_sibling_methods(ctx, fn, model)
    gates = [(c, _unrelated_gate(ctx, c, call, found)) for c in found]
    return next(((c, g) for c, g in gates if g is None), gates[0] if gates else (None, None))


def _upcasts_before_training(ctx: Context, calls: list[ast.Call], model: str, named: bool) -> tuple[list[ast.Call], bool]:
    """The fp32 upcasts among `calls` (in order) before the first that starts training, and whether one does. With
    `named`, a ``cast_training_params`` counts only when its arguments name `model`."""
    found: list[ast.Call] = []
    for other in calls:
        if _starts_training(ctx, other):
            return found, True
        func = other.func
        if (dotted(func) or "").rsplit(".", 1)[-1] == "cast_training_params":
            if not named or any(dotted(n) == model for a in other.args for n in ast.walk(a) if isinstance(n, ast.Attribute)):
                found.append(other)
        elif isinstance(func, ast.Attribute) and func.attr in ("to", "float"):
            receiver = dotted(func.value) or ""
            if (receiver == model or "param" in receiver) and ctx.flow.cast_dtype(other, ctx.src.scope(other)) == {"fp32"}:
                found.append(other)
    return found, False


def _upcasts_in_sibling_methods(ctx: Context, fn: ast.AST | None, model: str) -> list[ast.Call]:
    """A trainer class that adds the adapters to ``self.transformer`` in one method and builds the optimizer in
    another (``prepare_trainable_parameters`` / ``prepare_optimizer``): an fp32 upcast that names that attribute
    (``cast_training_params([self.transformer])``, ``self.transformer.to(dtype=torch.float32)``) in another method of
    the class, before that method starts training, runs before the GradScaler sees a gradient."""
    cls = ctx.src.parents.get(fn) if fn is not None else None
    if not isinstance(cls, ast.ClassDef):
        return []
    found: list[ast.Call] = []
    for method in cls.body:
        if method is fn or not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        calls = sorted(ctx.src.calls_in(method), key=lambda c: c.lineno)
        # a cast of some `param` of another method (a save hook's) says nothing of this model: the named ones only
        found += [c for c in _upcasts_before_training(ctx, calls, model, named=True)[0]
                  if (dotted(c.func) or "").endswith("cast_training_params") or dotted(c.func.value) == model]
    return found


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
    words = {w for n in ast.walk(node.test) for w in node_words(n)}
    if names & loop_names or words & _PRECISION_WORDS or ast.dump(node.test) in same:
        return False
    return ctx.flow.fp16_polarity(node.test, ctx.src.scope(node)) == 0


def _inside(ctx: Context, node: ast.AST, block: list[ast.stmt]) -> bool:
    return any(a in block for a in ctx.src.ancestors(node))


# Words of an optimizer's constructor as a trainer spells it (`torch.optim.AdamW`, `bnb.optim.AdamW8bit`, a chosen
# `optimizer_class(...)`).
_OPTIMIZER_WORDS = frozenset({"optim", "optimizer", "adam", "adamw", "sgd", "lion", "adafactor", "rmsprop", "lamb", "prodigy"})


@code_check("AMP105", triggers=("from_pretrained",), also=(("float16", "fp16", ".half()"), ("parameters()",)))
def trained_model_loaded_in_fp16(ctx: Context) -> Iterator[CodeHit]:
    # LLaVA #363, d8ahazard/sd_dreambooth_extension (a UNet loaded in fp16 as a fallback, then trained): the weights
    # an optimizer steps are fp16, and fp16 loss scaling refuses their gradients. DeepSpeed's fp16 engine keeps its
    # own fp32 masters and scaler: a file that names it is left alone.
    if not _fp16_scaled(ctx) or "deepspeed" in ctx.src.text.lower():
        return
    for node in ctx.src.assigns:
        load = _fp16_load(ctx, node)
        if load is None:
            continue
        name, call, dtype = load
        found = _optimizer_of(ctx, name, call)
        if found is None or _upcast_after(ctx, call, name)[0] is not None or _frozen_or_adapted(ctx, name, call, found[1]):
            continue
        optimizer = found[0]
        yield dtype, (f"`{name}` is loaded in fp16 (line {call.lineno}) and its parameters are what the optimizer (line "
                      f"{optimizer.lineno}) steps, in a run whose fp16 mixed precision scales the loss: the gradients are fp16 "
                      "and the GradScaler fails with 'Attempting to unscale FP16 gradients'; load it in fp32 (autocast "
                      f"computes in fp16 anyway) or cast `{name}.to(torch.float32)` before building the optimizer")


def _fp16_scaled(ctx: Context) -> bool:
    """A GradScaler, or a framework set up for mixed precision that may be fp16 in some run of the file (its loss
    scaler comes with it); bf16 mixed precision scales nothing."""
    if next(calls_named(ctx, GRAD_SCALERS), None) is not None:
        return True
    # a literal setting says which (bf16, "no"); one read from the run's options may be fp16
    return any(FP16 in ctx.facts.framework_half_dtypes(call) or not all(isinstance(v, ast.Constant) for v in given)
               for call, given in _precision_settings(ctx))


def _fp16_load(ctx: Context, node: ast.stmt) -> tuple[str, ast.Call, ast.AST] | None:
    """``name = Cls.from_pretrained(..., torch_dtype=torch.float16)`` (fp16 and nothing else): the name, the call
    and the dtype argument."""
    if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.Call)):
        return None
    call, name = node.value, dotted(node.targets[0])
    if name is None or not isinstance(call.func, ast.Attribute) or call.func.attr != "from_pretrained":
        return None
    dtype = next((kw.value for kw in call.keywords if kw.arg in ("torch_dtype", "dtype")), None)
    if dtype is None or ctx.flow.dtype_of(dtype, ctx.src.scope(call)) != {FP16}:
        return None
    return name, call, dtype


def _optimizer_of(ctx: Context, name: str, load: ast.Call) -> tuple[ast.Call, ast.AST] | None:
    """The optimizer built after the load, in the same function, over ``name.parameters()`` given directly or
    through a name bound to it (``params = itertools.chain(unet.parameters(), ...)``), unfiltered; with the node that
    names the parameters (the optimizer call, or that binding)."""
    fn = ctx.src.enclosing_function(load)
    holders = {dotted(t): node for node in ctx.src.assigns if isinstance(node, ast.Assign) and node.lineno > load.lineno
               and ctx.src.enclosing_function(node) is fn and _names_parameters(node.value, name) for t in node.targets}
    for call in ctx.src.calls:
        if call.lineno <= load.lineno or ctx.src.enclosing_function(call) is not fn or not call.args:
            continue
        words = tokens(dotted(call.func) or "")
        if not (words & _OPTIMIZER_WORDS or (ctx.qualname(call.func) or "").startswith("torch.optim.")):
            continue
        given = call.args[0]
        if _names_parameters(given, name):
            return call, call
        if dotted(given) in holders:
            return call, holders[dotted(given)]
    return None


def _names_parameters(expr: ast.AST, name: str) -> bool:
    """`expr` holds ``name.parameters()`` and filters none of it (``filter(lambda p: p.requires_grad, ...)``)."""
    text = ast.unparse(expr)
    return f"{name}.parameters()" in text and "requires_grad" not in text and "filter(" not in text


_ADAPTS = frozenset({"get_peft_model", "add_adapter", "prepare_model_for_kbit_training"})


def _frozen_or_adapted(ctx: Context, name: str, load: ast.Call, use: ast.AST) -> bool:
    """On every path from the load to where its parameters are handed to the optimizer (`use`), the model is frozen
    (``name.requires_grad_(False)``, ``p.requires_grad = False`` over its parameters) or given adapters (whose own
    weights are what trains). A freeze under a flag the optimizer's path does not share (``if args.use_lora:``) is
    no such path."""
    for node in ast.walk(ctx.src.enclosing_function(load) or ctx.src.tree):
        if not (load.lineno < getattr(node, "lineno", 0) < use.lineno and _freezes_or_adapts(node, name)):
            continue
        if _on_every_path_to(ctx, node, use):
            return True
    return False


def _freezes_or_adapts(node: ast.AST, name: str) -> bool:
    if isinstance(node, ast.Call):
        return _freeze_or_adapt_call(node, name)
    if isinstance(node, ast.For) and f"{name}." in ast.unparse(node.iter) and "parameters" in ast.unparse(node.iter):
        return any(isinstance(a, ast.Assign) and isinstance(a.value, ast.Constant) and a.value.value is False
                   and any(isinstance(t, ast.Attribute) and t.attr == "requires_grad" for t in a.targets) for a in ast.walk(node))
    return False


def _freeze_or_adapt_call(call: ast.Call, name: str) -> bool:
    """``name.requires_grad_(False)``, ``name.add_adapter(...)``, ``get_peft_model(name, ...)``."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "requires_grad_" and dotted(func.value) == name:
        return bool(call.args) and isinstance(call.args[0], ast.Constant) and call.args[0].value is False
    if isinstance(func, ast.Attribute) and func.attr in _ADAPTS and dotted(func.value) == name:
        return True
    return (dotted(func) or "").rsplit(".", 1)[-1] in _ADAPTS and bool(call.args) and dotted(call.args[0]) == name


def _on_every_path_to(ctx: Context, node: ast.AST, use: ast.AST) -> bool:
    """Every ``if`` around `node` is around `use` too, with both on the same side."""
    around_use = set(ctx.src.ancestors(use))
    for parent, child in ctx.src.steps(node):
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
            break
        if isinstance(parent, (ast.If, ast.Try, ast.For, ast.While)) and child is not getattr(parent, "test", None):
            if parent not in around_use:
                return False
            if isinstance(parent, ast.If) and (child in parent.body) != any(a in parent.body for a in around_use | {use}):
                return False
    return True
