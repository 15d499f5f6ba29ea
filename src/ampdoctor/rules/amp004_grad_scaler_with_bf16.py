"""AMP004 grad-scaler-with-bf16: A GradScaler is used while training in bf16.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP004`)."""

from __future__ import annotations

import ast
from typing import Any, Iterator, Mapping

from ampdoctor.core.engine import Places
from ampdoctor.core.model import Severity
from ampdoctor.core.registry import Hit, code_check, code_fix, policy_check
from ampdoctor.dtypes import BF16, FP16
from ampdoctor.facts import RunFacts
from ampdoctor.lint.cstedit import asked, imports_torch, keyword, with_keyword
from ampdoctor.lint.cstedit import dotted as cst_dotted
from ampdoctor.lint.python.context import GRAD_SCALERS, CodeHit, Context, bf16_in_function, calls_named
from ampdoctor.lint.python.dataflow import TORCH_DTYPES, autocast_argument, name_polarity
from ampdoctor.lint.python.facts import disables_autocast
from ampdoctor.lint.python.project import WEIGHTS_FP32_SAID
from ampdoctor.lint.python.resolve import argument, has_star_kwargs, last_identifier, tokens
from ampdoctor.policy import Policy

TERMINATORS = (ast.Return, ast.Raise, ast.Continue, ast.Break)


# Words of a condition or a flag that decides precision: a scaler created under one whose sign the dataflow cannot
# read (``enabled=need_scaler``, ``if args.precision == cfg.amp_mode:``) is gated by the run's precision, just not
# visibly to us; saying "without an fp16 gate" there would state a guess.
_PRECISION_WORDS = frozenset({"precision", "amp", "fp16", "bf16", "half", "dtype", "mixed", "scaler", "scale", "scaling",
                              "float16", "bfloat16", "autocast"})


def gate_sign(ctx: Context, call: ast.Call, name: str) -> tuple[int | None, ast.AST | None]:
    """(+1, gate) when only fp16 runs create or enable the scaler; (-1, branch) when it is created in a branch only
    bf16 runs take; (None, gate) when a precision condition gates it that the dataflow cannot read; (0, None) when
    nothing gates it."""
    scope = ctx.src.scope(call)
    enabled = argument(call, _enabled_position(name), "enabled")
    if enabled is not None and not isinstance(enabled, ast.Constant):
        sign = ctx.flow.fp16_polarity(enabled, scope)
        if sign:
            return sign, enabled
        if _discriminates(ctx, enabled, scope):
            return None, enabled
    elif enabled is not None and ctx.flow.fp16_polarity(enabled, scope) == 1:
        return 1, enabled
    unknown: ast.AST | None = None
    for parent, child in ctx.src.steps(call):
        if ctx.flow.branch_implies_fp16(parent, child, scope) or _early_exit_unless_fp16(ctx, child, scope):
            return 1, parent
        if _branch_implies_bf16(ctx, parent, child, scope):
            return -1, parent
        if unknown is None and isinstance(parent, (ast.If, ast.IfExp)) and _discriminates(ctx, parent.test, scope):
            unknown = parent  # ``GradScaler() if <precision test> else None`` is gated as an `if` block is
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) and name_polarity(parent.name) == 1:
            return 1, parent
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            break
    return (None, unknown) if unknown is not None else (0, None)


def _discriminates(ctx: Context, expr: ast.AST, scope: ast.AST, depth: int = 0) -> bool:
    """Does `expr` tell precisions apart (a comparison or test of a precision value, or a name bound to one)? A
    bare on/off flag (``cfg.mixed_precision``, ``use_amp``) does not: it is on for bf16 runs too."""
    for node in ast.walk(expr):
        if isinstance(node, (ast.Compare, ast.Call)) and _mentions_precision(node):
            return True
        if isinstance(node, (ast.Name, ast.Attribute)) and depth < 3:  # ``self.fp16_mode = mode == 1`` too
            if any(v is not None and _discriminates(ctx, v, scope, depth + 1) for _, v in ctx.src.bindings(node, scope)):
                return True
    return False


def _mentions_precision(expr: ast.AST) -> bool:
    for node in ast.walk(expr):
        ident = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
        if ident and tokens(ident) & _PRECISION_WORDS:
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and tokens(node.value) & _PRECISION_WORDS:
            return True
    return False


def _branch_implies_bf16(ctx: Context, parent: ast.AST, child: ast.AST, scope: ast.AST) -> bool:
    """`child` is the body of an `if bf16:` (``elif mixed_precision == "bf16":``) or the else of an `if fp16:`, as a
    statement or as a conditional expression (``GradScaler() if not fp16 else None``)."""
    if isinstance(parent, ast.IfExp):
        sign = ctx.flow.fp16_polarity(parent.test, scope)
        return (child is parent.body and sign == -1) or (child is parent.orelse and sign == 1)
    if not isinstance(parent, ast.If):
        return False
    sign = ctx.flow.fp16_polarity(parent.test, scope)
    return (child in parent.body and sign == -1) or (child in parent.orelse and sign == 1 and not _elif(parent, child))


def _elif(parent: ast.If, child: ast.AST) -> bool:
    """The else of ``if fp16: ... elif x: ...`` is another test, not "bf16"."""
    return isinstance(child, ast.If) and parent.orelse == [child]


def _early_exit_unless_fp16(ctx: Context, child: ast.AST, scope: ast.AST) -> bool:
    """An earlier statement of the same block leaves unless fp16: ``if compute != fp16: return None``."""
    block = ctx.src.block_of(child)
    for stmt in block[: block.index(child)] if block else ():
        if isinstance(stmt, ast.If) and stmt.body and isinstance(stmt.body[-1], TERMINATORS):
            # past `if test: return`, `not test` holds
            if ctx.flow.fp16_polarity(ast.UnaryOp(op=ast.Not(), operand=stmt.test), scope) == 1:
                return True
    return False


@code_check("AMP004", triggers=("GradScaler",), project=True)
def grad_scaler_with_bf16(ctx: Context) -> Iterator[CodeHit]:
    # Incident 4 (h2o-llmstudio #628): GradScaler() built unconditionally, then run on bf16 grads.
    for call, name in calls_named(ctx, GRAD_SCALERS):
        sign, gate = gate_sign(ctx, call, name)
        if sign == -1 and gate is not None and not _flag_turns_on_fp16_autocast(ctx, gate):
            enabled = any(gate is a for a in (*call.args, *(k.value for k in call.keywords)))
            where = "enabled only for bf16" if enabled else f"created in a branch only bf16 runs take (line {gate.lineno})"
            yield call, *_gated_verdict(ctx, f"`{name.rsplit('.', 1)[-1]}` is {where}")
            continue
        if sign != 0 or has_star_kwargs(call) or _paired_with_fp16_autocast(ctx, call):
            continue
        # bf16 on a path this scaler can run with: not the other side of its `if`, not under `if not x` for its `if x`
        evidence = next((e for e in ctx.facts.bf16_places() if not ctx.src.exclusive(e, call)), None)
        if evidence is None:
            continue  # a plain fp16 script, or one whose bf16 runs never create this scaler
        gate = fp16_gate(ctx, call, name)
        yield call, *_verdict(ctx, name.rsplit(".", 1)[-1], evidence), {"fp16_gate": gate} if gate else {}


def _flag_turns_on_fp16_autocast(ctx: Context, gate: ast.AST) -> bool:
    """The flag whose name says bf16 (``use_bfloat16``) is what this file's autocast takes as `enabled` where the
    autocast's dtype is float16 (``autocast(dtype=torch.float16, enabled=use_bfloat16)``): the flag switches fp16
    AMP on whatever its name says, and the scaler it gates is the one fp16 needs."""
    test = gate.test if isinstance(gate, (ast.If, ast.IfExp)) else gate
    flags = {last_identifier(n) for n in ast.walk(test) if isinstance(n, (ast.Name, ast.Attribute))
             and name_polarity(last_identifier(n) or "") == -1}
    for call, name in ctx.facts.autocast_calls:
        enabled = autocast_argument(call, name, "enabled")
        if isinstance(enabled, (ast.Name, ast.Attribute)) and last_identifier(enabled) in flags \
                and ctx.flow.dtype_of(autocast_argument(call, name, "dtype")) == {FP16}:
            return True
    return False


def fp16_gate(ctx: Context, scaler: ast.Call, name: str) -> str | None:
    """The condition that is true exactly in the fp16 runs, spelled for the scaler's place: ``ptdtype ==
    torch.float16`` when every autocast of the file takes its dtype from one name, bound before the scaler (to
    the same values there) to torch dtypes only, bf16 among them; ``False`` when bf16 is all the precision the
    file and its project run in (`Facts.never_fp16`). None when the code does not say, or the scaler's `enabled` is
    passed by position."""
    if len(scaler.args) > _enabled_position(name):
        return None
    dtypes = [d for c, n in ctx.facts.autocast_calls if (d := autocast_argument(c, n, "dtype")) is not None]
    if dtypes and all(isinstance(d, ast.Name) and d.id == dtypes[0].id for d in dtypes):
        return f"{dtypes[0].id} == torch.float16" if _seen_at(ctx, dtypes, scaler) else None
    if ctx.facts.bf16_dtype_named and ctx.facts.never_fp16 and ctx.project.precisions <= {BF16} \
            and all(ctx.flow.dtype_of(d) == {BF16} for d in dtypes):
        return "False"
    return None


def _seen_at(ctx: Context, names: list[ast.Name], scaler: ast.Call) -> bool:
    """Do the autocasts' dtype names hold, at the scaler, the same torch dtypes (bf16 among them) they hold where
    autocast reads them, bound before the scaler?"""
    scope = ctx.src.scope(scaler)
    bound = ctx.src.bindings(names[0], scope)
    if not bound or any(ctx.src.bindings(d, ctx.src.scope(d)) != bound for d in names):
        return False
    return min(line for line, _ in bound) < scaler.lineno and _torch_dtypes(ctx, names[0], scope) \
        and BF16 in (ctx.flow.dtype_of(names[0], scope) or ())


def _enabled_position(name: str) -> int:
    return 4 if name == "torch.cuda.amp.GradScaler" else 5


def _torch_dtypes(ctx: Context, expr: ast.AST, scope: ast.AST, depth: int = 0) -> bool:
    """Does `expr` hold torch dtype objects on every path (``torch.bfloat16``, a name bound only to such, a choice
    or a table of them)? A string ("bfloat16") compared with ``torch.float16`` is never equal."""
    if depth > 4:
        return False
    if isinstance(expr, (ast.Name, ast.Attribute)) and ctx.qualname(expr) in TORCH_DTYPES:
        return True
    if isinstance(expr, ast.Name):
        bound = ctx.src.bindings(expr, scope)
        return bool(bound) and all(v is not None and v is not expr and _torch_dtypes(ctx, v, scope, depth + 1) for _, v in bound)
    if isinstance(expr, ast.IfExp):
        return _torch_dtypes(ctx, expr.body, scope, depth + 1) and _torch_dtypes(ctx, expr.orelse, scope, depth + 1)
    if isinstance(expr, ast.Subscript):
        table = expr.value
        if isinstance(table, ast.Name):
            bound = ctx.src.bindings(table, scope)
            table = bound[0][1] if len(bound) == 1 else table
        return isinstance(table, ast.Dict) and bool(table.values) and all(_torch_dtypes(ctx, v, scope, depth + 1) for v in table.values)
    return False


@code_fix("AMP004")
def gate_scaler_on_fp16(module: Any, lines: Mapping[int, tuple[Mapping[str, Any], ...]]) -> Any:
    """``GradScaler()`` -> ``GradScaler(enabled=(ptdtype == torch.float16))`` (or ``enabled=False`` where bf16 is
    all the file runs in) at the lines where the detector found the condition (`fp16_gate`, the finding's detail).
    An `enabled=` already there is narrowed, never widened: ``enabled=use_amp and (ptdtype == torch.float16)``; a
    literal True is replaced. A scaler on only for bf16 is a logic error for a person to turn around."""
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider

    spells_torch = imports_torch(module)

    class Gate(cst.CSTTransformer):
        METADATA_DEPENDENCIES = (PositionProvider,)

        def leave_Call(self, original: Any, updated: Any) -> Any:
            name = cst_dotted(original.func)
            gate = asked(lines, self.get_metadata(PositionProvider, original).start.line, "fp16_gate")
            if gate is None or name is None or not name.endswith("GradScaler") or (gate != "False" and not spells_torch):
                return updated
            value = cst.parse_expression(gate if gate == "False" else f"({gate})")
            present = keyword(updated, "enabled")
            if present is not None and gate != "False" and not (isinstance(present.value, cst.Name) and present.value.value == "True"):
                kept = present.value if isinstance(present.value, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) \
                    else present.value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
                value = cst.BooleanOperation(left=kept, operator=cst.And(), right=value)
            return with_keyword(updated, "enabled", value)

    return MetadataWrapper(module).visit(Gate())


def _paired_with_fp16_autocast(ctx: Context, call: ast.Call) -> bool:
    """The function that creates the scaler enters autocast only in fp16 (a float16 dtype; or none on CUDA, whose
    default it is, where the function names no bf16): deliberate fp16 AMP, whatever bf16 the rest of the file uses
    (an upcast elsewhere, another entry point)."""
    scope = ctx.src.scope(call)
    bf16_here = bf16_in_function(ctx, call) is not None
    dtypes = [_autocast_dtype(ctx, ac, name, bf16_here)
              for ac, name in ctx.facts.autocast_calls if ctx.src.scope(ac) is scope and not disables_autocast(ac, ctx.src)]
    return bool(dtypes) and all(d == {FP16} for d in dtypes)


def _autocast_dtype(ctx: Context, call: ast.Call, name: str, bf16_here: bool) -> frozenset | None:
    given = autocast_argument(call, name, "dtype")
    if given is not None:
        return ctx.flow.dtype_of(given)
    device = autocast_argument(call, name, "device_type")
    cuda = name == "torch.cuda.amp.autocast" or (isinstance(device, ast.Constant) and device.value == "cuda")
    return frozenset({FP16}) if cuda and not bf16_here else None


def _verdict(ctx: Context, scaler: str, evidence: ast.AST) -> tuple[str, Severity | None]:
    """The message and severity of the policy predicate's situation: bf16 weights (bf16 gradients) are an error;
    weights this file builds in fp32 are a note (their gradients unscale fine: the scaler wastes work and changes no
    number); weights it does not show are an error, as in incident 4."""
    weights = bf16_weights(ctx)
    if weights is not None:
        return (f"`{scaler}` is created without an fp16 gate while the weights are bf16 (line {weights.lineno}): "
                "`unscale_` fails on their bf16 gradients on CUDA"), None
    built = fp32_weights(ctx)
    if built is not None:  # fp32 gradients unscale fine: the policy predicate's warning
        return (f"`{scaler}` is created without an fp16 gate in a file that uses bf16 (line {evidence.lineno}) while its "
                f"weights stay fp32 (line {built.lineno}): bf16 has fp32's range, so it scales for nothing"), Severity.INFO
    if ctx.project.weights_fp32:
        return (f"`{scaler}` is created without an fp16 gate in a file that uses bf16 (line {evidence.lineno}), and {_FP32_PROJECT}: "
                "their gradients unscale fine, so it scales for nothing"), Severity.INFO
    return (f"`{scaler}` is created without an fp16 gate in a file that uses bf16 (line {evidence.lineno}); "
            "with bf16 it fails in `unscale_` or scales for nothing"), None


def _gated_verdict(ctx: Context, said: str) -> tuple[str, Severity | None]:
    """A scaler that exists only in bf16 runs: an error where the weights are bf16 (`unscale_` fails on their
    gradients, incident 4), a note where the file keeps them fp32, and a warning where it does not show them: bf16
    autocast over fp32 weights, the usual reason for a bf16 flag, gives fp32 gradients that unscale fine."""
    weights = bf16_weights(ctx)
    if weights is not None:
        return f"{said}, and the weights are bf16 (line {weights.lineno}): `unscale_` fails on their bf16 gradients on CUDA", None
    built = fp32_weights(ctx)
    if built is not None:
        return (f"{said}, while its weights stay fp32 (line {built.lineno}): bf16 has fp32's range, so it scales for "
                "nothing"), Severity.INFO
    if ctx.project.weights_fp32:
        return f"{said}, and {_FP32_PROJECT}: their gradients unscale fine, so it scales for nothing", Severity.INFO
    return (f"{said}: over bf16 weights it fails in `unscale_`; over fp32 weights under bf16 autocast it scales for "
            "nothing"), Severity.WARNING


# What `ProjectContext.weights_fp32` says, as a finding says it.
_FP32_PROJECT = f"{WEIGHTS_FP32_SAID}, so the weights stay fp32 under bf16 autocast"


def bf16_weights(ctx: Context) -> ast.AST | None:
    """Where the file makes its weights bf16: a model cast (``model.to(torch.bfloat16)``, ``.bfloat16()``,
    ``from_pretrained(torch_dtype=...)``), a cast of a ``torch.nn`` module built in place, or any call given
    ``torch_dtype=torch.bfloat16`` (a model loader)."""
    cast = next((c.node for c in ctx.facts.model_casts if BF16 in c.dtypes), None)
    if cast is not None:
        return cast
    for call in ctx.src.calls:
        value = next((kw.value for kw in call.keywords if kw.arg == "torch_dtype"), None)
        if value is not None and ctx.flow.dtype_of(value) == {BF16}:
            return call
        if isinstance(call.func, ast.Attribute) and _torch_module(ctx, call.func.value) and ctx.flow.cast_dtype(call) == {BF16}:
            return call
    return None


def fp32_weights(ctx: Context) -> ast.AST | None:
    """Where the file builds its model and keeps it fp32: ``model = torch.nn.Linear(...)`` or an instance of a class
    it defines, with no model cast to half and no ``torch_dtype=`` anywhere in the file."""
    if ctx.facts.model_casts or any(kw.arg == "torch_dtype" for call in ctx.src.calls for kw in call.keywords):
        return None
    defined = {c.name for c in ctx.src.classes}
    for call in ctx.src.calls:
        if isinstance(ctx.src.parents.get(call), ast.Assign) and (_torch_module(ctx, call) or last_identifier(call.func) in defined):
            return call
    return None


def _torch_module(ctx: Context, expr: ast.AST) -> bool:
    """``torch.nn.Linear(4, 4)``: a module constructed by a torch.nn class."""
    name = ctx.src.imports.qualname(expr.func) if isinstance(expr, ast.Call) else None
    return bool(name and name.startswith("torch.nn.") and name.rsplit(".", 1)[-1][:1].isupper())


@policy_check("AMP004")
def grad_scaler_with_bf16_policy(policy: Policy | None, facts: RunFacts, at: Places) -> Iterator[Hit]:
    # Incident 4 (h2o-llmstudio #628): loss scaling on bf16 gradients fails in GradScaler's unscale kernel on CUDA.
    if policy is None or policy.loss_scale == "none" or BF16 not in (policy.compute, policy.grads) or facts.trains is False:
        return
    reason = facts.loss_scaler_reason or f"loss_scale={policy.loss_scale}"
    here = at("loss_scale")
    if policy.grads == BF16:
        yield Hit(f"a GradScaler is on ({reason}) while the weights and gradients are bf16: GradScaler.unscale_ fails with "
                  "'\"_amp_foreach_non_finite_check_and_unscale_cuda\" not implemented for 'BFloat16'' (incident 4)",
                  here, related=at.others(here, "params"))
    else:
        # fp32 gradients unscale fine: the scaler only costs time and changes no number, so it is a note.
        yield Hit(f"a GradScaler is on ({reason}) while compute is bf16, which has fp32's range and needs no loss scaling",
                  here, severity=Severity.INFO, related=at.others(here, "compute"))
