"""AMP131 input-dtype-mismatch: Inputs reach a layer in another dtype than its weights (fp32 batch into a half model, or the reverse).

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP131`)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

from ampdoctor.core.model import Severity
from ampdoctor.core.registry import Hit, code_check, runtime_check
from ampdoctor.dtypes import FP16, name_of
from ampdoctor.lint.python.context import FLOAT_UP, HALF_WORDS, CodeHit, Context, parameter_attributes
from ampdoctor.lint.python.dataflow import FP32, HALF, describe
from ampdoctor.lint.python.facts import AUTOCASTING_FRAMEWORKS, HALF_SWITCHES, ModelCast, enters_autocast, handles_autocast
from ampdoctor.lint.python.fp32 import (
    HALF_WEIGHT_WORDS,
    VIEWS,
    autocast_elsewhere,
    device_move,
    follows_weights,
    fp32_made,
    half_weights,
    in_with_block,
    last_value,
    made_in,
    under_autocast,
    weight_dtype_cast,
)
from ampdoctor.lint.python.resolve import dotted, keyword, last_identifier, self_attribute, tokens

if TYPE_CHECKING:
    from ampdoctor.audit.analysis import RuntimeContext


@runtime_check("AMP131")
def batch_in_another_dtype(ctx: RuntimeContext) -> Iterator[Hit]:
    """The failing op received a tensor made outside the model next to a weight of another dtype: nothing cast the
    batch where it entered a model cast to half (or a half batch entered an fp32 model), and no autocast ran the op."""
    found = ctx.unconverted_input()
    site = ctx.failure
    if found is None or site is None:
        return
    given, weight, dtype = found
    # the fix is where the inputs are handed to the module: the user's call, with the layer that refused them beside it
    call = ctx.trace.user_call(site.where.module)
    moved = call is not None and (call.file, call.line) != (site.where.file, site.where.line)
    where, related = (call, (site.where,)) if moved else (site.where, ())
    yield Hit(f"{site.head}: the {name_of(given)} operand comes from inputs that entered the model as {name_of(given)}, and "
              f"nothing inside it made them {name_of(dtype)} before they met the {name_of(dtype)} weights of {weight}; cast them where they enter the model "
              f"(`x.to({name_of(dtype)})`), or run the forward under autocast with the model kept fp32",
              where, related=related, severity=Severity.ERROR, details={"input_dtype": name_of(given), "module": weight, "weight_dtype": name_of(dtype)})


# --- code: the static view --------------------------------------------------------------------------------------

# torch's layers whose forward refuses an input in another dtype than their weights, outside autocast.
_LAYERS = frozenset({f"torch.nn.{n}" for n in ("Linear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
                                               "ConvTranspose3d")})
_LAYER_FUNCTIONS = frozenset({f"torch.nn.functional.{n}" for n in ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                                                                   "conv_transpose2d", "conv_transpose3d")})


@code_check("AMP131", triggers=("Linear", "Conv", "linear", "conv"), also=(("float", "zeros", "ones", "randn", "rand(", "linspace",
                                                                          "empty", "eye("), HALF_WEIGHT_WORDS), project=True)
def fp32_tensor_into_half_layer(ctx: Context) -> Iterator[CodeHit]:
    """Inside a model, a torch linear or conv layer is fed a tensor the code made fp32 (``self.proj(x.float())``, a new
    ``torch.zeros(...)`` without dtype) while the model's weights are half (the file or the project casts it, or its
    other inputs are cast to ``self.dtype``), outside autocast: the layer refuses the mixed operands."""
    if autocast_elsewhere(ctx):
        return
    layers = _torch_layers(ctx)
    named = {attr for per_class in layers.values() for attr in per_class}
    for call in ctx.src.calls:
        if not call.args:
            continue
        attr = self_attribute(call.func)  # most calls are neither a layer of the file nor a functional one: asked first
        if (attr not in named) if attr is not None else ctx.qualname(call.func) not in _LAYER_FUNCTIONS:
            continue
        cls = ctx.src.enclosing_class(call)
        if cls is None:
            continue
        layer = _torch_layer(ctx, cls, call, layers.get(cls, {}))
        if layer is None:
            continue
        scope = ctx.src.scope(call)
        made = fp32_made(ctx, call.args[0], scope) or _loose_buffer(ctx, cls, call.args[0], scope)
        if made is None or under_autocast(ctx, call) or _kept_fp32(ctx, layer) or ctx.facts.expects_error(call):
            continue
        origin = ctx.src.enclosing_function(made)
        returned = f" in `{origin.name}`, which returns it" if origin is not None and origin is not ctx.src.enclosing_function(call) else ""
        why = half_weights(ctx, cls)
        if why is None:
            continue
        what, _ = why
        yield call, (f"`{layer}` gets `{ast.unparse(call.args[0])[:40]}`, {made_in(made)} (line {made.lineno}){returned}, "
                     f"while its weights are half: {what}; nothing casts it and no autocast runs the call, so the layer meets "
                     f"an fp32 input beside half weights; cast it to the layer's dtype (`.to(self.{layer}.weight.dtype)`)"
                     if layer != "weight" else
                     f"this layer's input `{ast.unparse(call.args[0])[:40]}` is {made_in(made)} (line "
                     f"{made.lineno}){returned} while {what}; cast it to the weight's dtype"), Severity.WARNING


def _loose_buffer(ctx: Context, cls: ast.ClassDef, expr: ast.AST, scope: ast.AST) -> ast.Call | None:
    """The ``register_buffer`` of a buffer the expression reads that the module builds in fp32 and keeps out of its
    checkpoint (``persistent=False``): a loader that gives the weights the checkpoint's half dtype leaves it fp32."""
    found = _buffer_of(ctx, cls, expr, scope)
    return found[1] if found is not None and not found[2] else None


def _torch_layer(ctx: Context, cls: ast.ClassDef, call: ast.Call, layers: dict[str, str]) -> str | None:
    """The torch layer a call runs: ``self.proj(x)`` with ``self.proj = nn.Linear(...)`` in the class (its name; `layers`
    are the class's, `_torch_layers`), or ``F.conv2d(x, self.weight)`` ("weight")."""
    attr = self_attribute(call.func)
    if attr is not None:
        return layers.get(attr)
    if ctx.qualname(call.func) in _LAYER_FUNCTIONS:
        weight = call.args[1] if len(call.args) > 1 else keyword(call, "weight")
        return "weight" if weight is not None and _module_weight(ctx, cls, weight) else None
    return None


def _torch_layers(ctx: Context) -> dict[ast.ClassDef, dict[str, str]]:
    """By class, the attributes it binds to a torch linear or conv layer (``self.proj = nn.Linear(...)``): read from
    the file's calls, once (a walk of every class for every call costs seconds on a tree of model files)."""
    out: dict[ast.ClassDef, dict[str, str]] = {}
    for call in ctx.src.calls:
        bound = ctx.src.parents.get(call)
        if isinstance(bound, ast.Assign) and bound.value is call and ctx.qualname(call.func) in _LAYERS:
            cls = ctx.src.enclosing_class(call)
            if cls is not None:
                out.setdefault(cls, {}).update((a, a) for t in bound.targets if (a := self_attribute(t)) is not None)
    return out


def _module_weight(ctx: Context, cls: ast.ClassDef, expr: ast.AST) -> bool:
    """The weight operand of a functional layer is the module's own parameter (``self.weight * self.scale``), which a
    cast of the model makes half, and nothing makes it fp32 on the way (``self.weight.float()``)."""
    if ctx.flow.tensor_dtype(expr, ctx.src.scope(expr)) or fp32_made(ctx, expr, ctx.src.scope(expr)) is not None:
        return False
    params = parameter_attributes(ctx, cls)
    return any(self_attribute(n) in params for n in ast.walk(expr) if isinstance(n, ast.Attribute))


def _kept_fp32(ctx: Context, layer: str) -> bool:
    """The layer is kept fp32 by name (``self.proj.float()``, ``_keep_in_fp32_modules = ["proj"]``)."""
    if "keep_in_fp32" in ctx.src.text and (f"'{layer}'" in ctx.src.text or f'"{layer}"' in ctx.src.text):
        return True
    for call in ctx.src.calls:
        func = call.func
        if isinstance(func, ast.Attribute) and last_identifier(func.value) == layer and (ctx.flow.cast_dtype(call) or frozenset()) & FLOAT_UP:
            return True
    return False


@code_check("AMP131", triggers=("register_buffer",), also=((".dtype",),), project=True)
def input_cast_to_buffer_dtype(ctx: Context) -> Iterator[CodeHit]:
    """``x = x.to(self.kernel.dtype)`` before an op with a buffer the module built in fp32 (``torch.tensor(...)``, a
    factory without dtype), in a module that casts its other inputs to its weights' dtype: the activation follows the
    buffer, not the weights. A loader that gives the weights the checkpoint's half dtype (``from_pretrained(torch_dtype=
    ...)``) leaves a buffer the checkpoint lacks (``persistent=False``) as it was built, fp32, and the activation leaves
    the model's dtype there; cast the buffer to the input (``kernel.to(x.dtype)``) instead."""
    if autocast_elsewhere(ctx):
        return
    for call in ctx.src.calls:
        func = call.func
        if not (isinstance(func, ast.Attribute) and func.attr in ("to", "type") and (call.args or call.keywords)):
            continue
        given = keyword(call, "dtype") or (call.args[0] if call.args else None)
        cls = ctx.src.enclosing_class(call)
        if cls is None or not (isinstance(given, ast.Attribute) and given.attr == "dtype") or follows_weights(given):
            continue
        found = _buffer_of(ctx, cls, given.value, ctx.src.scope(call))
        follows = weight_dtype_cast(ctx, cls) if found is not None else None
        if found is None or follows is None:
            continue
        name, registered, persistent = found
        yield call, (f"`{ast.unparse(func.value)[:40]}` is cast to the dtype of the buffer `{name}`, which the module builds in fp32 "
                     f"(line {registered.lineno}{'' if persistent else ', not persistent: no checkpoint gives it the weights dtype'}), "
                     f"while the class casts its other inputs to the weights' dtype (line {follows.lineno}): in a half model the "
                     f"activation leaves the model's dtype for this op; cast the buffer to the input instead "
                     f"(`{ast.unparse(given.value)[:30]}.to({ast.unparse(func.value)[:20]}.dtype)`)"), \
            Severity.WARNING if not persistent else Severity.INFO


def _buffer_of(ctx: Context, cls: ast.ClassDef, expr: ast.AST, scope: ast.AST, depth: int = 0) -> tuple[str, ast.Call, bool] | None:
    """The buffer of the class an expression reads (through views and local names): its name, its
    ``register_buffer`` call and whether it is persistent, where it was built fp32 (`fp32_made` of its value)."""
    if depth > 6:
        return None
    if isinstance(expr, ast.Subscript):
        return _buffer_of(ctx, cls, expr.value, scope, depth + 1)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in VIEWS:
        return _buffer_of(ctx, cls, expr.func.value, scope, depth + 1)
    if isinstance(expr, ast.Name):
        value = last_value(ctx, expr, scope)
        return _buffer_of(ctx, cls, value, scope, depth + 1) if value is not None else None
    attr = self_attribute(expr)
    return _registered_fp32(ctx, cls, attr) if attr is not None else None


def _registered_fp32(ctx: Context, cls: ast.ClassDef, attr: str) -> tuple[str, ast.Call, bool] | None:
    """``self.register_buffer("attr", value, persistent=...)`` in the class, with a value built fp32."""
    for node in ast.walk(cls):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "register_buffer"
                and len(node.args) >= 2 and isinstance(node.args[0], ast.Constant) and node.args[0].value == attr):
            continue
        if _built_fp32(ctx, node.args[1], ctx.src.scope(node)):
            persistent = keyword(node, "persistent")
            return attr, node, not (isinstance(persistent, ast.Constant) and persistent.value is False)
    return None


def _built_fp32(ctx: Context, expr: ast.AST, scope: ast.AST, depth: int = 0) -> bool:
    """A tensor built in fp32: `fp32_made`, through arithmetic (``kernel / kernel.sum()``) and indexing, and
    ``torch.tensor(values)`` of a sequence the code does not show (fp32 once divided)."""
    if depth > 6:
        return False
    if fp32_made(ctx, expr, scope) is not None:
        return True
    if isinstance(expr, ast.BinOp):
        return _built_fp32(ctx, expr.left, scope, depth + 1) or (isinstance(expr.op, ast.Div) and not isinstance(expr.left, ast.Constant))
    if isinstance(expr, ast.Subscript):
        return _built_fp32(ctx, expr.value, scope, depth + 1)
    if isinstance(expr, ast.Name):
        value = last_value(ctx, expr, scope)
        return value is not None and _built_fp32(ctx, value, scope, depth + 1)
    return False


@code_check("AMP131", triggers=HALF_WORDS, also=(("float", "randn", "rand(", "zeros", "ones", "linspace", "empty", "eye("),), project=True)
def fp32_batch_into_half_model(ctx: Context) -> Iterator[CodeHit]:
    """A model cast to half (``model.to(torch.bfloat16)``, ``.half()``, ``from_pretrained(torch_dtype=torch.float16)``)
    and then called, outside autocast, with a tensor the code made fp32 (``torch.randn(...)`` without dtype,
    ``x.float()``): nothing casts the batch to the model's dtype before its first layer."""
    if autocast_elsewhere(ctx):
        return
    casts = [c for c in ctx.facts.model_casts if c.name]
    if not casts:
        return
    for call in ctx.src.calls:
        cast = _half_model_called(ctx, call, casts)
        if cast is None or under_autocast(ctx, call) or ctx.facts.expects_error(call):
            continue
        scope = ctx.src.scope(call)
        for arg in _batch_arguments(call):
            made = fp32_made(ctx, arg, scope) or _collated_fp32(ctx, arg, scope)
            if made is None:
                continue
            external = cast.local_class is None and isinstance(cast.node.func, ast.Attribute) and cast.node.func.attr == "from_pretrained"
            yield call, (f"`{cast.name}` is {describe(cast.dtypes)} (line {cast.node.lineno}) and is called without autocast with "
                         f"`{ast.unparse(arg)[:40]}`, {made_in(made)} (line {made.lineno}): its first layer "
                         f"meets that input beside {describe(cast.dtypes)} weights"
                         + (" unless the model casts its inputs itself" if external else "")
                         + f"; cast it (`.to({cast.name}.dtype)`) or make it in that dtype"), Severity.INFO if external else Severity.WARNING
            break


# Keywords a model takes its batch by. Other inputs (a timestep, a guidance scale, a mask) are often meant fp32, and
# models cast them themselves (a timestep embedding's `timestep.to(hidden_states.dtype)`).
_BATCH_KEYWORDS = frozenset({"x", "input", "inputs", "sample", "samples", "pixel_values", "images", "image", "img", "imgs",
                             "hidden_states", "latents", "input_values", "input_features", "inputs_embeds", "audio", "video"})


def _batch_arguments(call: ast.Call) -> list[ast.AST]:
    """The batch a model call passes: its first positional argument, or a keyword named like a batch."""
    return call.args[:1] + [k.value for k in call.keywords if k.arg in _BATCH_KEYWORDS]


def _half_model_called(ctx: Context, call: ast.Call, casts: list[ModelCast]) -> ModelCast | None:
    """The half cast of the model a call runs (``model(x)``, ``model.forward(x)``), made before it in the same scope
    (a ``self.model`` in the same class), with no cast back to fp32 between them."""
    func = call.func
    target = dotted(func.value) if isinstance(func, ast.Attribute) and func.attr == "forward" else dotted(func)
    if target is None:
        return None
    for cast in casts:
        if cast.name != target:
            continue
        same = (ctx.src.enclosing_class(cast.node) is ctx.src.enclosing_class(call) and ctx.src.enclosing_class(call) is not None) if target.startswith("self.") \
            else ctx.src.scope(cast.node) is ctx.src.scope(call) and cast.node.lineno < call.lineno
        if same and not _cast_back(ctx, target, cast.node.lineno, call.lineno):
            return cast
    return None


def _cast_back(ctx: Context, target: str, start: int, end: int) -> bool:
    for other in ctx.src.calls:
        func = other.func
        if isinstance(func, ast.Attribute) and start < other.lineno < end and dotted(func.value) == target:
            if (ctx.flow.cast_dtype(other) or frozenset()) & FLOAT_UP:
                return True
    return False


# Methods that run a module on its batch: its call, ``forward``, and the encoders and decoders of autoencoders and
# text towers (``vae.encode(pixels)``, ``vae.decode(latents)``).
_RUN_METHODS = frozenset({"forward", "encode", "decode"})
# A place that gives a model or a tensor its dtype (None where the code does not say it), as `_model_dtypes` and
# `_input_dtypes` list them.
Event = tuple[ast.AST, "frozenset | None"]
# Methods of a module that return it, through which a binding reaches its cast (``AutoencoderKL.from_pretrained(...)
# .to(device).eval()``).
_CHAIN_METHODS = frozenset({"to", "cuda", "cpu", "eval", "train", "requires_grad_"})


@code_check("AMP131", triggers=("float32", "float16", "bfloat16", ".float()", ".half()", "torch.float", "torch.half"),
            also=(("dtype", ".float()", ".half()", ".bfloat16()"),), project=True)
def input_cast_against_model_branch(ctx: Context) -> Iterator[CodeHit]:
    """A model is cast to one dtype on some path of a function (``vae.to(dtype=torch.float32)`` on one side of an
    ``if``, the run's ``weight_dtype`` on the other) and called there, outside autocast and not handed to a framework
    that autocasts its forward, with an input cast to another dtype on a path that meets that cast
    (``pixel_values.to(dtype=weight_dtype)`` for every run): in a run that takes both, the first layer gets an input
    in another dtype than its weights. Where the model is fp32 and the input the run's weight dtype, that is every
    run with mixed precision on; accelerate autocasts only the models `prepare` wraps."""
    if ctx.project.autocast is not None:
        return
    # the modules the file both casts (or binds) and calls with inputs, narrowed by their last name before anything
    # costlier: most casts in a model file are of tensors, which are never called
    last = _cast_or_bound_last_names(ctx)
    called = [(call, model) for call in ctx.src.calls if (call.args or call.keywords) and _run_last_name(call) in last
              and (model := _run_model(call)) is not None]
    cast = _module_casts(ctx, {model for _, model in called}) if called else {}
    if not any(dtypes for events in cast.values() for _, dtypes in events) or _framework_runs_every_step(ctx):
        return
    prepared = ctx.facts.prepared_names
    casts = [c for c in ctx.facts.model_casts if c.name] if not autocast_elsewhere(ctx) else []
    for call, model in called:
        if model not in cast or model in prepared:
            continue
        found = _model_call_mismatch(ctx, call, model, cast[model], casts)
        if found is None:
            continue
        (model_node, model_dtypes), (input_node, input_dtypes), arg = found
        message = (f"`{model}` is {_said(ctx, model_node, model_dtypes)} on a path through line {model_node.lineno}, and this call, "
                   f"without autocast and not prepared by a framework that autocasts it, gives it `{ast.unparse(arg)[:40]}`, "
                   f"{_said(ctx, input_node, input_dtypes)} on a path through line {input_node.lineno} that meets that cast: in a "
                   f"run that takes both, its first layer gets an input in another dtype than its weights; cast the input to the "
                   f"model's dtype on that path (`.to({model}.dtype)`) or run the call under autocast")
        yield (call, *_launched_fp16_note(ctx, message, model_dtypes, input_dtypes))


def _launched_fp16_note(ctx: Context, message: str, model_dtypes: frozenset, input_dtypes: frozenset) -> tuple[str, Severity]:
    """The input is fp16 (``latents.half()``), the model's dtype is the run's (fp16 among others), and every launch
    line of the project that starts this script runs it in fp16 (`Facts.launched_fp16`): in each of the project's own
    runs the model is fp16 too, and only a run someone else starts in another precision meets the mismatch. Said in
    the message of a note; a warning otherwise."""
    where = ctx.facts.launched_fp16 if input_dtypes == {FP16} and FP16 in model_dtypes and len(model_dtypes) > 1 else None
    if where is None:
        return message, Severity.WARNING
    return (message + f"; every launch of this script in the project runs it in fp16 ({where}, ...), where the model is fp16 as "
            "well: only a run someone else starts in another precision gets the mismatch"), Severity.INFO


def _model_call_mismatch(ctx: Context, call: ast.Call, model: str, cast: list[Event], casts: list[ModelCast]):
    """`_mismatch` of a call of a model the file casts, where no autocast reaches the call and the model does not cast
    its inputs itself."""
    scope = ctx.src.scope(call)
    if _casts_its_inputs(ctx, model, scope):
        return None
    models = _model_dtypes(ctx, model, call, scope, cast)
    if not any(dtypes for _, dtypes in models) or _autocast_reaches(ctx, call) or ctx.facts.expects_error(call):
        return None
    half_covered = bool(casts) and _half_model_called(ctx, call, casts) is not None
    return _mismatch(ctx, call, scope, models, half_covered)


def _said(ctx: Context, node: ast.AST, dtypes: frozenset) -> str:
    """How the message names the dtype a cast gives: the dtype, or the expression that chooses it by run."""
    if len(dtypes) == 1:
        return describe(dtypes)
    scope = ctx.src.scope(node)
    chosen = next((e for n in ast.walk(node) if isinstance(n, ast.Call)
                   for e in [keyword(n, "dtype"), keyword(n, "torch_dtype"), *n.args[:2]] if e is not None and ctx.flow.dtype_of(e, scope)), None)
    return f"{describe(dtypes)} by run (`{ast.unparse(chosen)[:30]}`)" if chosen is not None else describe(dtypes)


def _framework_runs_every_step(ctx: Context) -> bool:
    """A framework other than accelerate that autocasts the whole step it runs (HF's Trainer, Lightning, composer) is
    given a precision in this file, or a class of the file is such a framework's module: the code may run under its
    autocast whatever model it calls. Accelerate autocasts only what `prepare` wraps (`Facts.prepared_names`)."""
    for call in ctx.src.calls:
        root = (ctx.qualname(call.func) or "").partition(".")[0]
        if root in AUTOCASTING_FRAMEWORKS and root != "accelerate" and any(kw.arg in HALF_SWITCHES for kw in call.keywords):
            return True
    for cls in ctx.src.classes:
        for base in cls.bases:
            root = (ctx.qualname(base) or "").partition(".")[0]
            if root in AUTOCASTING_FRAMEWORKS and root != "accelerate" or "Lightning" in (last_identifier(base) or ""):
                return True
    return False


def _casts_its_inputs(ctx: Context, model: str, scope: ast.AST) -> bool:
    """A module that casts its float inputs to its weights' dtype itself: a pipeline (it preprocesses what it is
    given), or a model of transformers' (its vision and audio embeddings cast `pixel_values` to their weights'), by
    its name or by the class a binding of it builds it from."""
    if tokens(model.rpartition(".")[2]) & {"pipe", "pipeline"}:
        return True
    for _, value in ctx.src.bindings(ast.parse(model, mode="eval").body, scope):
        while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in _CHAIN_METHODS | _CAST_NAMES:
            value = value.func.value
        if not isinstance(value, ast.Call):
            continue
        func = value.func.value if isinstance(value.func, ast.Attribute) and value.func.attr.startswith("from_") else value.func
        if (ctx.qualname(func) or "").startswith("transformers.") or (last_identifier(func) or "").endswith("Pipeline"):
            return True
    return False


def _cast_or_bound_last_names(ctx: Context) -> set[str]:
    """The last names of what the file casts (``self.vae.to(...)``: ``vae``) or binds to a method call's result
    (``enc = Encoder.from_pretrained(...)``): `_module_casts` looks no further than these."""
    out = {func.value.attr if isinstance(func.value, ast.Attribute) else func.value.id for call in ctx.src.calls
           if isinstance(func := call.func, ast.Attribute) and func.attr in _CAST_NAMES and isinstance(func.value, (ast.Name, ast.Attribute))}
    out.update(t.attr if isinstance(t, ast.Attribute) else t.id for node in ctx.src.assigns if isinstance(node, ast.Assign)
               and len(node.targets) == 1 and isinstance(t := node.targets[0], (ast.Name, ast.Attribute)) and _dtype_chain(node.value))
    return out


_LOADERS = frozenset({"from_pretrained", "from_single_file", "from_config"})


def _dtype_chain(value: ast.AST) -> bool:
    """A chain of method calls with a cast or a loader in it (what `_built_dtype` can read a dtype from)."""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
        if value.func.attr in _CAST_NAMES or value.func.attr in _LOADERS:
            return True
        value = value.func.value
    return False


def _run_last_name(call: ast.Call) -> str | None:
    """The last name of the module a call runs (`_run_model` without building the dotted name)."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in _RUN_METHODS:
        func = func.value
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def _run_model(call: ast.Call) -> str | None:
    """The name of the module a call runs: ``vae(x)``, ``self.encoder.forward(x)``, ``vae.encode(pixels)``."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in _RUN_METHODS:
        return dotted(func.value)
    return dotted(func) if isinstance(func, (ast.Name, ast.Attribute)) else None


def _autocast_reaches(ctx: Context, call: ast.Call) -> bool:
    """The call runs under autocast: in a ``with`` block of its function that may turn it on, or in a function
    decorated with one or called (in this file) from such a block."""
    # (`_in_autocast_with` accepts every block `under_autocast` does: an item's last name is one of its names)
    if _in_autocast_with(ctx, call):
        return True
    fn = ctx.src.enclosing_function(call)
    if fn is None:
        return False
    if any(handles_autocast(d) for d in fn.decorator_list):
        return True
    callers = [c for c in ctx.src.calls if last_identifier(c.func) == fn.name]
    return any(_in_autocast_with(ctx, c) for c in callers)


def _in_autocast_with(ctx: Context, node: ast.AST) -> bool:
    """`node` runs in a ``with`` block of its function whose context names autocast anywhere (``with (torch.autocast(
    "cuda") if amp else nullcontext()):``), and does not turn it off."""
    return in_with_block(ctx, node, lambda expr: enters_autocast(expr, ctx.src))


def _module_casts(ctx: Context, called: set[str]) -> dict[str, list[tuple[ast.AST, frozenset | None]]]:
    """By the name of what they cast, among the `called` names, the file's casts (``vae.to(device, dtype=torch.float32)``,
    ``net.half()``) and bindings that give a dtype (``enc = Encoder.from_pretrained(..., torch_dtype=torch.float16)``),
    each with the dtypes it names (None where it does not say: a binding then holds anything). Names never cast are
    left out."""
    out: dict[str, list[tuple[ast.AST, frozenset | None]]] = {}
    for other in ctx.src.calls:
        func = other.func
        if isinstance(func, ast.Attribute) and func.attr in _CAST_NAMES and (name := dotted(func.value)) in called \
                and not _chained_into(ctx, other):
            out.setdefault(name, []).append((other, ctx.flow.cast_dtype(other, ctx.src.scope(other)) or None))
    for node in ctx.src.assigns:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and (name := dotted(node.targets[0])) in called \
                and (given := _built_dtype(ctx, node.value, ctx.src.scope(node))):
            out.setdefault(name, []).append((node.value, given))
    return out


_CAST_NAMES = frozenset({"to", "half", "float", "bfloat16", "type"})


def _model_dtypes(ctx: Context, model: str, call: ast.Call, scope: ast.AST, casts: list[tuple[ast.AST, frozenset | None]]) -> list[Event]:
    """The casts of the model (`_module_casts`) in the call's function before it and not on the other side of an ``if``
    from it (`_before`), each with the dtypes it casts to; and the bindings of it whose dtype the code does not say
    (None): a model bound anew may be anything."""
    events = [(node, dtypes) for node, dtypes in casts if node.lineno < call.lineno and ctx.src.scope(node) is scope]
    target = ast.parse(model, mode="eval").body
    for line, value in ctx.src.bindings(target, scope):
        if value is not None and line < call.lineno and ctx.src.scope(value) is scope and _built_dtype(ctx, value, scope) is None:
            events.append((value, None))
    return _before(ctx, events, call)


def _chained_into(ctx: Context, call: ast.Call) -> bool:
    """A cast whose result is bound (``vae = vae.to(dtype)``): its binding is the event (`_model_dtypes`)."""
    parent = ctx.src.parents.get(call)
    return isinstance(parent, ast.Assign) and parent.value is call or isinstance(parent, ast.Attribute) and parent.attr in _CHAIN_METHODS


def _built_dtype(ctx: Context, value: ast.AST, scope: ast.AST, depth: int = 0) -> frozenset | None:
    """The dtype a binding of a module gives it: its cast, through the module methods chained after it, or a loader's
    ``torch_dtype=``; None where it does not say (a loader's default, another module)."""
    if depth > 8 or not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)):
        return None
    func = value.func
    if func.attr in _LOADERS:
        given = keyword(value, "torch_dtype") or keyword(value, "dtype")
        return ctx.flow.dtype_of(given, scope) or None if given is not None else None
    found = ctx.flow.cast_dtype(value, scope) if func.attr in _CAST_NAMES else None
    if found:
        return found
    return _built_dtype(ctx, func.value, scope, depth + 1) if func.attr in _CHAIN_METHODS else None


def _before(ctx: Context, events: list[Event], call: ast.Call) -> list[Event]:
    """The events (bindings, casts) that may run before the call in one pass: not on the other side of an ``if`` from
    it; in the order they are written."""
    return sorted((e for e in events if not ctx.src.exclusive(e[0], call)), key=lambda e: (e[0].lineno, e[0].col_offset))


def _holds(ctx: Context, events: list[Event], index: int, path: set[tuple[str, bool]]) -> bool:
    """Event `index` of `events` (`_before`) is the last on a path through the ``if`` sides `path`: no later event
    runs on every such path (its sides are among them)."""
    return not any(_sides(ctx, node) <= path for node, _ in events[index + 1:])


def _sides(ctx: Context, node: ast.AST) -> set[tuple[str, bool]]:
    """The ``if`` tests (statements and conditional expressions) of its function that `node` sits under, each with the
    side it sits on, by what they test (`_test_key`: two ``if`` statements of one test share it); an ``except`` handler
    or the ``else`` of a loop or a ``try`` is a side of its own."""
    out: set[tuple[str, bool]] = set()
    for parent, child in ctx.src.steps(node):
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            break
        if isinstance(parent, ast.If) and child is not parent.test:
            key, positive = _test_key(parent.test)
            out.add((key, (child in parent.body) == positive))
        elif isinstance(parent, ast.ExceptHandler) or isinstance(parent, (ast.For, ast.AsyncFor, ast.While, ast.Try)) and child in parent.orelse:
            out.add((f"{id(parent)}:{id(child)}", True))
        elif isinstance(parent, ast.IfExp) and child is not parent.test:
            key, positive = _test_key(parent.test)
            out.add((key, (child is parent.body) == positive))
    return out


# Comparison operators by their positive form: ``x is not None`` tests ``x is None`` with the sides swapped.
_POSITIVE = {ast.IsNot: ast.Is, ast.NotEq: ast.Eq, ast.NotIn: ast.In}


def _test_key(test: ast.expr) -> tuple[str, bool]:
    """What an ``if`` tests, as a key shared by its negations, and whether the test says it (True) or its negation:
    ``not x`` is ``x`` negated, ``p is not None`` is ``p is None`` negated."""
    positive = True
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, positive = test.operand, not positive
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _POSITIVE:
        test = ast.Compare(left=test.left, ops=[_POSITIVE[type(test.ops[0])]()], comparators=test.comparators)
        positive = not positive
    return ast.dump(test), positive


def _contradicts(path: set[tuple[str, bool]]) -> bool:
    """A path that takes both sides of one test: no pass runs it."""
    return any((key, not side) in path for key, side in path)


def _input_dtypes(ctx: Context, arg: ast.AST, call: ast.Call, scope: ast.AST) -> list[Event]:
    """Where the input may last have been given its dtype, with it: a cast in the argument itself
    (``vae.encode(x.to(dtype=weight_dtype))``), or the bindings of a name before the call (`_before`), with the
    dtype each casts it to or None."""
    if isinstance(arg, ast.Name):
        return _before(ctx, [(value, _cast_of_input(ctx, value, scope)) for line, value in ctx.src.bindings(arg, scope)
                             if value is not None and line < call.lineno and ctx.src.scope(value) is scope], call)
    return [(arg, _cast_of_input(ctx, arg, scope))]


def _cast_of_input(ctx: Context, expr: ast.AST, scope: ast.AST) -> frozenset | None:
    """The dtype an expression surely casts or makes its tensor in: `fp32_made`'s fp32 (or a batch's item the file's
    collate function makes fp32), or an explicit cast (``.to(dtype=weight_dtype)``, ``.half()``), through views and
    moves to a device after it."""
    if fp32_made(ctx, expr, scope) is not None or _collated_fp32(ctx, expr, scope) is not None:
        return FP32
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        found = ctx.flow.cast_dtype(expr, scope)
        if found:
            return found
        if not (expr.func.attr in VIEWS or device_move(expr)):
            return None
        expr = expr.func.value
    return None


def _mismatch(ctx: Context, call: ast.Call, scope: ast.AST, models: list[Event], half_covered: bool):
    """A cast of the model and a cast of one of the call's batch arguments that one pass may take together and leave
    as the last before the call (`_holds`), in dtypes that differ (`_differ`), as ((model node, dtypes), (input node,
    dtypes), argument)."""
    at = _sides(ctx, call)
    for arg in _batch_arguments(call):
        inputs = _input_dtypes(ctx, arg, call, scope)
        for i, (node, given) in enumerate(inputs):
            for m, (cast, dtypes) in enumerate(models):
                if not given or not dtypes or not _differ(dtypes, given) or ctx.src.exclusive(cast, node):
                    continue
                if half_covered and given == FP32 and dtypes <= HALF:
                    continue  # `fp32_batch_into_half_model` says it
                path = at | _sides(ctx, cast) | _sides(ctx, node)
                if not _contradicts(path) and _holds(ctx, models, m, path) and _holds(ctx, inputs, i, path):
                    return (cast, dtypes), (node, given), arg
    return None


_FLOATS = frozenset({"fp32", "bf16", "fp16"})


def _differ(model: frozenset, given: frozenset) -> bool:
    """The model's and the input's dtypes differ in some run: one of them is a single dtype the code names and the
    other may be a float dtype besides it (the run's ``weight_dtype`` is half exactly where mixed precision is on)."""
    floats = _FLOATS
    if len(model) == 1 and len(given) == 1:
        return model != given and model <= floats and given <= floats
    if len(model) == 1 and model <= floats:
        return bool((given & floats) - model) and bool(given & HALF or model & HALF)
    if len(given) == 1 and given <= floats:
        return bool((model & floats) - given) and bool(model & HALF or given & HALF)
    return False


# Wrappers a training loop iterates a loader through (``enumerate(loader)``, ``tqdm(loader)``): they yield its batches.
_ITERATION_WRAPPERS = frozenset({"enumerate", "tqdm", "iter"})


def _collated_fp32(ctx: Context, expr: ast.AST, scope: ast.AST) -> ast.AST | None:
    """``batch["pixel_values"]`` (through views and moves) in ``for batch in loader:``, where ``loader =
    DataLoader(..., collate_fn=collate_fn)`` and the file's ``collate_fn`` returns a dict whose "pixel_values" it made
    fp32 (``torch.stack(...).float()``): where that tensor was made fp32, else None."""
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and (device_move(expr) or expr.func.attr in VIEWS) \
            and expr.func.attr != "float":
        expr = expr.func.value
    if not (isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Name) and isinstance(expr.slice, ast.Constant)
            and isinstance(expr.slice.value, str)):
        return None
    collate = next((c for c in _loaders_of(ctx, expr.value, scope)), None)
    if collate is None:
        return None
    for ret in ctx.src.own_returns(collate):
        if isinstance(ret.value, ast.Dict):
            value = next((v for k, v in zip(ret.value.keys, ret.value.values) if isinstance(k, ast.Constant) and k.value == expr.slice.value), None)
            made = fp32_made(ctx, value, collate) if value is not None else None
            if made is not None:
                return made
    return None


def _loaders_of(ctx: Context, batch: ast.Name, scope: ast.AST) -> Iterator[ast.FunctionDef]:
    """The collate functions of this file that the loaders a loop over `batch` iterates were built with."""
    loop = next((p for p, child in ctx.src.steps(batch) if isinstance(p, ast.For) and child is not p.iter), None)
    if loop is None or not any(isinstance(n, ast.Name) and n.id == batch.id for n in ast.walk(loop.target)):
        return
    source = loop.iter
    if isinstance(source, ast.Call) and isinstance(source.func, ast.Name) and source.func.id in _ITERATION_WRAPPERS and source.args:
        source = source.args[0]
    if not isinstance(source, (ast.Name, ast.Attribute)):
        return
    functions = {f.name: f for f in ctx.src.tree.body if isinstance(f, ast.FunctionDef)}
    for _, value in ctx.src.bindings(source, scope):
        if isinstance(value, ast.Call) and last_identifier(value.func) == "DataLoader":
            given = keyword(value, "collate_fn")
            if isinstance(given, ast.Name) and given.id in functions:
                yield functions[given.id]
