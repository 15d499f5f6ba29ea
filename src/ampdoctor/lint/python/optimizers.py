"""What a file does with its optimizers: which one trains (is stepped), over the parameters of which modules, and
whether a wrapper that keeps fp32 master weights steps it instead. Shared by the rules about the weights an optimizer
steps (AMP119 pure-bf16-optimizer, AMP128 mixed-precision-without-master-weights)."""

from __future__ import annotations

import ast
import re

from ampdoctor.facts import MASTER_OPTIMIZERS
from ampdoctor.lint.python.context import Context, calls_named
from ampdoctor.lint.python.resolve import dotted, keyword, last_identifier, tokens

PLAIN_OPTIMIZERS = frozenset(f"torch.optim.{n}" for n in (
    "AdamW", "Adam", "SGD", "RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam", "Adadelta", "Adafactor"))


_PARAMETERS = frozenset({"parameters", "named_parameters"})

# torch 2.13, checked on CPU with a bf16/fp16 parameter and an fp32 `.grad` (and an fp32 one with a bf16 `.grad`),
# foreach or not: these optimizers raise at `step()` ("expected dtype c10::BFloat16 for `end` but got dtype float":
# they lerp their state, kept in the parameter's dtype, towards the gradient). SGD, RMSprop, Adagrad, Adadelta and
# Adafactor step such a pair without error, unless built with `fused=True` ("expected scalar type BFloat16 but found
# Float"). Used by AMP003 and AMP120.
MIXED_DTYPE_STEP_FAILS = frozenset(f"torch.optim.{n}" for n in ("Adam", "AdamW", "Adamax", "NAdam", "RAdam"))

# Optimizers a config names that read the gradient into an fp32 copy before they use it, so a parameter and its
# gradient of two dtypes step without error: SimpleTuner's `adamw_bf16` (AdamWBF16: `add_stochastic_` and
# `addcmul_` on its bf16 state take an fp32 gradient; read in its code and its ops run on CPU, torch 2.13).
_NAMED_STEPS_MIXED = frozenset({"adamw_bf16"})
# How configs name a torch optimizer: `torch.optim.AdamW`, `torch_optim.adamw`, SimpleTuner's `torch-adamw`, and HF's
# `adamw_torch` / `adamw_torch_fused` (a fused one raises too).
_TORCH_NAMED = re.compile(r"torch[._-](?:optim[._-])?(?P<prefixed>\w+)|(?P<suffixed>\w+?)_torch(?P<fused>_fused)?")


def named_step_fails(name: str | None) -> bool | None:
    """Does the step of the optimizer a config names (`name`) raise where a parameter and its gradient differ in
    dtype: True for torch's Adam family and fused optimizers (`MIXED_DTYPE_STEP_FAILS`), False for the torch
    optimizers that step such a pair and those that read the gradient in fp32 (`_NAMED_STEPS_MIXED`), None where the
    name says neither (another library's optimizer, a bare `AdamW` that may be any library's)."""
    text = (name or "").strip().lower()
    if text in _NAMED_STEPS_MIXED:
        return False
    match = _TORCH_NAMED.fullmatch(text)
    if match is None:
        return None
    if match["fused"] or "fused" in text.split("_"):
        return True
    short = match["prefixed"] or match["suffixed"]
    torch_names = {n.rsplit(".", 1)[-1].lower(): n for n in PLAIN_OPTIMIZERS}
    if short not in torch_names:
        return None
    return torch_names[short] in MIXED_DTYPE_STEP_FAILS


def steps_over(ctx: Context, modules: set[str]) -> tuple[str | None, str | None]:
    """The torch optimizers this file builds over the parameters of one of `modules` (dotted names), or of a module
    holding or held by one of them (``torch.optim.AdamW(model.parameters())`` for ``model``), by their short names:
    the first whose step raises where a parameter and its gradient differ in dtype (`MIXED_DTYPE_STEP_FAILS`, or any
    built with ``fused=True``), and the first of them all. (None, None) where the file builds none over them."""
    failing = first = None
    for call, name in calls_named(ctx, PLAIN_OPTIMIZERS):
        given = parameter_roots(ctx, call)
        if not (modules and given and any(overlap(a, b) for a in given for b in modules)):
            continue
        short = name.rsplit(".", 1)[-1]
        first = first or short
        fused = keyword(call, "fused")
        if failing is None and (name in MIXED_DTYPE_STEP_FAILS or isinstance(fused, ast.Constant) and fused.value is True):
            failing = short
    return failing, first


def wrapped_in_master(ctx: Context, call: ast.Call) -> bool:
    """The file wraps optimizers in one that keeps fp32 master weights (DeepSpeed's BF16_Optimizer, Megatron's
    Float16Optimizer: an engine that builds the plain "basic" optimizer and hands it on), and does not step this
    one itself: what steps the half weights is the wrapper, from its fp32 copy."""
    if not any(MASTER_OPTIMIZERS.fullmatch(last_identifier(c.func) or "") for c in ctx.src.calls):
        return False
    name = _stored_as(ctx, call)
    return name is None or not _steps_itself(ctx, name)


def overlap(a: str, b: str) -> bool:
    """One dotted module name is the other or holds it (``model`` and ``model.lm_head``)."""
    pa, pb = a.split("."), b.split(".")
    return pa[:len(pb)] == pb or pb[:len(pa)] == pa


def parameter_roots(ctx: Context, call: ast.Call) -> set[str] | None:
    """The modules whose ``.parameters()`` the optimizer is given (through a variable assigned once before it,
    ``itertools.chain``, ``filter``, comprehensions and param-group dicts), or None where anything else could add
    parameters to it."""
    expr = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "params"), None)
    if isinstance(expr, ast.Name):
        expr = _only_assignment(ctx, expr.id, call)
    if expr is None:
        return None
    bound = _bound_names(expr)
    roots: set[str] = set()
    for source in _param_sources(expr):
        found = _roots_in(source, bound)
        if found is None:
            return None
        roots |= found
    return roots or None


def _bound_names(expr: ast.AST) -> set[str]:
    """Names bound inside `expr`: comprehension targets and lambda arguments (``lambda p: p.requires_grad``)."""
    bound = {n.id for n in ast.walk(expr) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return bound | {a.arg for n in ast.walk(expr) if isinstance(n, ast.Lambda) for a in n.args.args}


def _param_sources(expr: ast.AST) -> list[ast.AST]:
    """Where parameters can come from: in param groups (``[{"params": m.parameters(), "lr": args.lr}]``) only the
    "params" values, else the whole expression."""
    return [v for d in ast.walk(expr) if isinstance(d, ast.Dict)
            for k, v in zip(d.keys, d.values) if isinstance(k, ast.Constant) and k.value == "params"] or [expr]


# What a parameter list is wrapped in on its way to the optimizer.
_WRAPPERS = frozenset({"itertools", "chain", "list", "filter", "tuple", "iter", "sorted"})


def _roots_in(expr: ast.AST, bound: set[str]) -> set[str] | None:
    """The modules of the ``m.parameters()`` calls in `expr`; None where one is called on something not named, or
    where `expr` names a variable that is neither such a module, a wrapper nor bound inside it (another variable's
    parameters, or a list built elsewhere)."""
    roots = set()
    for n in ast.walk(expr):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _PARAMETERS:
            root = dotted(n.func.value)
            if root is None:
                return None
            roots.add(root)
    known = bound | _WRAPPERS | {r.split(".")[0] for r in roots}
    return None if any(isinstance(n, ast.Name) and n.id not in known for n in ast.walk(expr)) else roots


def _only_assignment(ctx: Context, name: str, call: ast.Call) -> ast.AST | None:
    """The value of the one plain assignment of `name` in the optimizer's function before it, when nothing else
    (an augmented assignment, `append`/`extend`/`insert`, a second assignment) changes it."""
    scope = ctx.src.enclosing_function(call) or ctx.src.tree
    found = None
    for node in ast.walk(scope):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            if found is not None or node.lineno >= call.lineno:
                return None
            found = node.value
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Name) and node.target.id == name:
            return None
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("append", "extend", "insert")
              and isinstance(node.func.value, ast.Name) and node.func.value.id == name):
            return None
    return found


# Calls that take an optimizer and step it: accelerate/Lightning/DeepSpeed wrappers, an HF Trainer, a GradScaler.
_STEPPERS = frozenset({"prepare", "initialize", "Trainer", "step", "setup", "setup_optimizers", "fit"})
# Words of a training loop's name (`train(model, loader, optimizer)`, `train_one_epoch`, `run_training`): one handed
# the optimizer steps it, wherever it is defined.
_LOOP_WORDS = frozenset({"train", "training", "trainer"})


def stepped(ctx: Context, call: ast.Call) -> bool:
    """Is the optimizer `call` builds the one that trains: stepped (`opt.step()`), handed to something that steps it
    (`accelerator.prepare(model, opt)`, `scaler.step(opt)`, `Trainer(optimizers=(opt, ...))`, a training loop's
    function `train(model, loader, opt)`), or returned (a `configure_optimizers`). One built only to load a checkpoint into is not."""
    name = _stored_as(ctx, call)
    if name is None:
        return True  # returned, handed on in place, or used where this check cannot follow it: assume it trains
    if _steps_itself(ctx, name):
        return True
    for use in ctx.src.calls:
        callee = last_identifier(use.func) or ""
        if (callee in _STEPPERS or tokens(callee) & _LOOP_WORDS) and any(dotted(a) == name for a in (*use.args, *(k.value for k in use.keywords))):
            return True
    return any(isinstance(node, ast.Return) and node.value is not None and dotted(node.value) == name for node in ast.walk(ctx.src.tree))


def _stored_as(ctx: Context, call: ast.Call) -> str | None:
    """The variable or attribute the optimizer `call` builds is assigned to (``opt = AdamW(...)``), else None."""
    parent = ctx.src.parents.get(call)
    return dotted(parent.targets[0]) if isinstance(parent, ast.Assign) and len(parent.targets) == 1 else None


def _steps_itself(ctx: Context, name: str) -> bool:
    """The file calls ``name.step()``."""
    return any(isinstance(c.func, ast.Attribute) and c.func.attr == "step" and dotted(c.func.value) == name for c in ctx.src.calls)
