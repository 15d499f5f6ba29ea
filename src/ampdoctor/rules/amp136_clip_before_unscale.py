"""AMP136 clip-before-unscale: Gradients are clipped while a GradScaler still has them multiplied by the loss scale.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP136`)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

from ampdoctor.audit.evidence import Phase
from ampdoctor.core.model import Severity
from ampdoctor.core.registry import Hit, code_check, runtime_check
from ampdoctor.lint.launch import short_path
from ampdoctor.lint.python.context import CodeHit, Context
from ampdoctor.lint.python.resolve import argument, dotted, keyword, last_identifier, tokens

if TYPE_CHECKING:
    from ampdoctor.audit.analysis import RuntimeContext

# torch's clipping functions; a trainer's own `clip_grad_norm_` method (accelerate's, Lightning's) unscales first.
CLIPS = frozenset({
    "torch.nn.utils.clip_grad_norm_", "torch.nn.utils.clip_grad_value_", "torch.nn.utils.clip_grad_norm",
    "torch.nn.utils.clip_grad.clip_grad_norm_", "torch.nn.utils.clip_grad.clip_grad_value_",
    "torch.nn.utils.clip_grad.clip_grad_norm",
})
# The names of a project's or another library's own clipping function (`from utils import clip_grad_norm`): called
# as a function, it clips what it is given as torch's does. A method of a trainer object (accelerate's, Lightning's,
# Fabric's) is no such function: those unscale first.
CLIP_NAMES = frozenset({"clip_grad_norm", "clip_grad_norm_", "clip_grad_value", "clip_grad_value_", "clip_grads",
                        "clip_gradients", "clip_grad_norm_fp32"})
# `scaler.unscale_(opt)`, accelerate's `accelerator.unscale_gradients()`.
UNSCALES = frozenset({"unscale_", "unscale_gradients"})


def _is_scaler(ctx: Context, receiver: ast.AST, scope: ast.AST) -> bool:
    """A GradScaler by name (`scaler`, `self.grad_scaler`) or by what it was made from, and not one built disabled."""
    made = [v for _, v in ctx.src.bindings(receiver, scope)] if isinstance(receiver, (ast.Name, ast.Attribute)) else []
    for value in made:
        if isinstance(value, ast.Call) and (last_identifier(value.func) or "").endswith("GradScaler"):
            enabled = keyword(value, "enabled")
            return not (isinstance(enabled, ast.Constant) and enabled.value is False)
    return "scaler" in tokens(last_identifier(receiver) or "")


def _kept_on_object(ctx: Context, receiver: ast.AST, scope: ast.AST) -> str | None:
    """Where a local scaler was fetched from when it is kept on an object: ``scaler = self.scaler`` -> "self.scaler",
    ``scaler = getattr(self, f"scaler{i}")`` (one of several, by index) -> "self.scaler*"."""
    if not isinstance(receiver, ast.Name):
        return None
    made = [v for _, v in ctx.src.bindings(receiver, scope)]
    if len(made) != 1:
        return None
    value = made[0]
    if isinstance(value, ast.Attribute) and "." in (dotted(value) or ""):
        return dotted(value)
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "getattr" and len(value.args) == 2:
        owner, attr = dotted(value.args[0]), value.args[1]
        if isinstance(attr, ast.JoinedStr) and attr.values and isinstance(attr.values[0], ast.Constant):
            attr = attr.values[0]  # f"scaler{index}": the scalers named by that prefix
            return f"{owner}.{attr.value}*" if owner else None
        if isinstance(attr, ast.Constant) and isinstance(attr.value, str) and owner:
            return f"{owner}.{attr.value}"
    return None


def _kept_expr(kept: str) -> ast.expr:
    """The attribute a scaler is kept as, to read its bindings and words ("self.scaler*" -> ``self.scaler``)."""
    return ast.parse(kept.rstrip("*"), mode="eval").body


def _scaler_calls(ctx: Context, calls: list[ast.Call], attr: str, scope: ast.AST) -> dict[str, list[int]]:
    """{scaler: lines} of ``scaler.<attr>(...)`` among `calls`; a local fetched from an object is named by where it
    is kept (`_kept_on_object`), so that a method that scales and another that steps name the same scaler."""
    out: dict[str, list[int]] = {}
    for node in calls:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == attr and node.args and ctx.qualname(func) is None:
            own = ctx.src.enclosing_function(node) or scope
            kept = _kept_on_object(ctx, func.value, own)
            name = kept or dotted(func.value)
            if name is None:
                continue
            if _is_scaler(ctx, func.value, own) or (kept is not None and _is_scaler(ctx, _kept_expr(kept), own)):
                out.setdefault(name, []).append(node.lineno)
    return out


def _scaled_steps(ctx: Context, body: ast.AST, calls: list[ast.Call]) -> Iterator[tuple[str, int, int, bool]]:
    """(scaler, line of `scaler.scale(...)`, line of the `scaler.step(...)`, scaled in this function) for the steps
    of one function: scaled before them in the same function, or, for a scaler kept on an object (`self.scaler`),
    in another method of a file that never unscales."""
    scales = _scaler_calls(ctx, calls, "scale", body)
    for name, steps in _scaler_calls(ctx, calls, "step", body).items():
        if name in scales:
            after = [line for line in steps if line > min(scales[name])]
            if after:
                yield name, min(scales[name]), max(after), True
        elif "." in name and not _unscales(ctx, ctx.src.calls):
            elsewhere = _scaler_calls(ctx, ctx.src.calls, "scale", body).get(name)
            if elsewhere:
                yield name, min(elsewhere), max(steps), False


def _unscales(ctx: Context, calls: list[ast.Call]) -> list[int]:
    return [c.lineno for c in calls if isinstance(c.func, ast.Attribute) and c.func.attr in UNSCALES]


def _own_calls(ctx: Context, body: ast.AST) -> list[ast.Call]:
    """The calls of a function or module body, not those of functions nested in it."""
    return ctx.src.calls_in(None if isinstance(body, ast.Module) else body)


def _is_clip(ctx: Context, call: ast.Call) -> bool:
    """torch's clipping, or a clipping function imported from elsewhere or defined in this file (`CLIP_NAMES`) that
    is handed no scaler (one that is may unscale itself) and, where its body is here, unscales nothing."""
    name = ctx.qualname(call.func)
    if name in CLIPS:
        return True
    if last_identifier(call.func) not in CLIP_NAMES:
        return False
    own = [f for f in ctx.src.functions if isinstance(f, ast.FunctionDef) and isinstance(call.func, ast.Name)
           and f.name == call.func.id and ctx.src.parents.get(f) is ctx.src.tree]
    if not (own or name is not None and not name.startswith("torch.")):
        return False
    if _handed_the_scale(call):
        return False
    return not any(isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr in UNSCALES
                   for f in own for c in ast.walk(f))


def _handed_the_scale(call: ast.Call) -> bool:
    """The call is handed the scaler, or its scale (``scale=self.scaler.get_scale()``, mmf's threshold times the
    scale): it may unscale, or clip at a threshold scaled alike."""
    handed = [*call.args, *(kw.value for kw in call.keywords)]
    return any(kw.arg == "scale" for kw in call.keywords) or any(
        "scaler" in tokens(n.attr if isinstance(n, ast.Attribute) else n.id)
        for a in handed for n in ast.walk(a) if isinstance(n, (ast.Name, ast.Attribute)))


def _no_clipping(call: ast.Call) -> bool:
    """`clip_grad_norm_(params, float("inf"))`: a norm for logging, nothing is clipped."""
    limit = argument(call, 1, "max_norm") or argument(call, 1, "clip_value")
    text = ast.unparse(limit) if limit is not None else ""
    return "inf" in text


@code_check("AMP136", triggers=("clip_grad",), also=((".scale(",), (".step(",)), project=True)
def clip_before_unscale(ctx: Context) -> Iterator[CodeHit]:
    # Lightning #9599, pytorch/examples #1196: `clip_grad_norm_` between `scaler.scale(loss).backward()` and
    # `scaler.step(opt)` with no `scaler.unscale_(opt)` first compares the scaled norm with the threshold.
    all_clips = [c for c in ctx.src.calls if _is_clip(ctx, c)]
    for body in {ctx.src.enclosing_function(c) or ctx.src.tree for c in all_clips}:
        calls = _own_calls(ctx, body)
        own = set(calls)
        clips = [c for c in all_clips if c in own and not _no_clipping(c)]
        unscaled = _unscales(ctx, calls)
        for scaler, scaled, stepped, here in _scaled_steps(ctx, body, calls):
            for clip in clips:
                if (scaled < clip.lineno or not here) and clip.lineno < stepped and not any(line < clip.lineno for line in unscaled):
                    shown = scaler[:-1] + "{...}" if scaler.endswith("*") else scaler
                    said = (f"`{last_identifier(clip.func)}` clips gradients that `{shown}` scaled (line {scaled}) and has not "
                            f"unscaled yet; call the scaler's `unscale_(optimizer)` before clipping")
                    caller = None if here or not ctx.project.unscaled_in else _called_from_elsewhere(ctx, body)
                    if caller is not None:
                        # the scale and the clip are in two methods that this file does not drive: the project
                        # unscales elsewhere, and the caller that runs them may do it in between
                        yield clip, (f"{said}; but the scaling and this clipping are in two methods, nothing in this file "
                                     f"calls `{caller}`, and {short_path(ctx.project.unscaled_in)} unscales: the code that "
                                     "runs them may unscale in between"), Severity.INFO
                        continue
                    yield clip, said


def _called_from_elsewhere(ctx: Context, body: ast.AST) -> str | None:
    """The name of the method `body` when no call in its file names it (``self.do_step(...)``, ``do_step(...)``):
    it is run by code in another file."""
    if not isinstance(body, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    return None if any(last_identifier(c.func) == body.name for c in ctx.src.calls) else body.name


NORMS = frozenset({"aten::linalg_vector_norm", "aten::_foreach_norm", "aten::norm"})
CLAMPS = frozenset({"aten::clamp_", "aten::_foreach_clamp_min_", "aten::_foreach_clamp_max_", "aten::clamp"})
SCALES = frozenset({"aten::mul_", "aten::_foreach_mul_"})
UNSCALE_OP = "aten::_amp_foreach_non_finite_check_and_unscale_"


@runtime_check("AMP136")
def clipped_while_scaled(ctx: RuntimeContext) -> Iterator[Hit]:
    """After a backward, gradients are measured and rescaled in place (a norm, then `mul_`), or clamped, before the
    scaler's unscale kernel ran: the clip saw gradients still multiplied by the loss scale."""
    t = ctx.trace
    if UNSCALE_OP not in t.recorded():
        return  # no GradScaler unscaled anything in this step
    ops = list(t.ops())
    norm = None
    for op in ops:
        name = t.op(op.seq)
        if op.phase != Phase.OPTIMIZER:
            norm = None
            continue
        if name == UNSCALE_OP:
            norm = None
            continue
        from_backward = any(p is not None and p >= 0 and t.op_at(p).phase == Phase.BACKWARD for p in op.producers)
        if name in NORMS and from_backward:
            norm = op if norm is None else norm
        elif (name in SCALES and norm is not None) or (name in CLAMPS and from_backward):
            if _unscaled_later(t, ops, op.seq):
                yield Hit("gradients are clipped before the GradScaler unscaled them: the clip threshold is compared with "
                          "gradients multiplied by the loss scale", t.location((norm or op).seq))
                return


def _unscaled_later(t, ops: list, seq: int) -> bool:
    """The scaler's unscale kernel runs after `seq` and before the next forward: this step's gradients were scaled."""
    for op in ops:
        if op.seq <= seq:
            continue
        if op.phase == Phase.FORWARD:
            return False
        if t.op(op.seq) == UNSCALE_OP:
            return True
    return False
