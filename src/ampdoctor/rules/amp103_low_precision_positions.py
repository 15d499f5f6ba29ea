"""AMP103 low-precision-positions: Integer positions or timesteps are held in bf16/fp16, which cannot represent them exactly.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP103`)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

from ampdoctor.audit.evidence import Phase, Tag
from ampdoctor.core.model import Severity
from ampdoctor.core.registry import Hit, code_check, runtime_check
from ampdoctor.dtypes import EXACT_INT, FP16, ROPE_WORDS, name_of
from ampdoctor.lint.python.context import (
    HALF_WORDS,
    POSITION_FACTORIES,
    POSITION_TOKENS,
    CodeHit,
    Context,
    assigned_name,
    chain_words,
    half_casts,
)
from ampdoctor.lint.python.dataflow import HALF, describe
from ampdoctor.lint.python.kind import runs_training_loop
from ampdoctor.lint.python.resolve import dotted, keyword, tokens

if TYPE_CHECKING:
    from ampdoctor.audit.analysis import RuntimeContext

# Identifier words of tensors that hold embeddings or masks, not positions, although named after them.
NOT_POSITIONS = frozenset({"emb", "embed", "embeds", "embedding", "embeddings", "enc", "encoding", "encodings", "bias",
                           "weight", "weights", "mask", "input", "token", "tokens", "layer", "head"})


# Words of a name that holds a count or an index bound: ``linspace(0, size - 1, steps=size)`` spans whole numbers.
_COUNT_WORDS = frozenset({"size", "len", "length", "num", "n", "steps", "step", "timesteps", "seq", "max", "count",
                          "total", "frames", "positions", "tokens", "end", "start", "stop"})


def _whole_bound(expr: ast.AST) -> bool:
    """Is a bound of ``torch.linspace`` a whole number: an integer literal, ``len(x)`` or ``int(x)``, a name that
    says a count, or arithmetic of such? A tensor's element (``bbox_min[0]``), a fraction or anything else spans a
    grid of coordinates, which half precision rounds by its relative precision only, not a run of positions."""
    if isinstance(expr, ast.Constant):
        return isinstance(expr.value, (int, float)) and not isinstance(expr.value, bool) and float(expr.value).is_integer()
    if isinstance(expr, ast.UnaryOp):
        return _whole_bound(expr.operand)
    if isinstance(expr, ast.BinOp):
        return not isinstance(expr.op, ast.Div) and _whole_bound(expr.left) and _whole_bound(expr.right)
    if isinstance(expr, ast.Call):
        return isinstance(expr.func, ast.Name) and expr.func.id in ("len", "int")
    if isinstance(expr, (ast.Name, ast.Attribute)):
        return bool(tokens(expr.id if isinstance(expr, ast.Name) else expr.attr) & _COUNT_WORDS)
    return False


def _spans_positions(ctx: Context, call: ast.Call) -> bool:
    """Does a position factory make whole numbers: ``arange`` and ``range`` do; ``linspace`` where both its bounds are
    whole numbers (`_whole_bound`)."""
    if ctx.qualname(call.func) != "torch.linspace":
        return True
    bounds = [keyword(call, "start") or (call.args[0] if call.args else None),
              keyword(call, "end") or (call.args[1] if len(call.args) > 1 else None)]
    return all(b is not None and _whole_bound(b) for b in bounds)


def _small_range(call: ast.Call, dtypes: frozenset) -> bool:
    limit = min(EXACT_INT[d] for d in dtypes if d in EXACT_INT)
    bounds = [a for a in call.args[:2]]
    return bool(bounds) and all(isinstance(b, ast.Constant) and isinstance(b.value, (int, float)) and abs(b.value) <= limit for b in bounds)


def _last_assignment(ctx: Context, receiver: ast.AST, call: ast.Call) -> ast.stmt | None:
    """The last assignment to the name `receiver` before `call` in its scope."""
    if not isinstance(receiver, ast.Name):
        return None
    scope = ctx.src.scope(call)
    last: ast.stmt | None = None
    for node in ast.walk(scope):
        if isinstance(node, (ast.Assign, ast.AugAssign)) and node.lineno < call.lineno and (last is None or node.lineno > last.lineno):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == receiver.id for t in targets):
                last = node
    return last


def _divided_before(last: ast.stmt | None) -> bool:
    """The name's last assignment before the cast divides it (``t /= 1000``, ``t = t / num_steps``): the values are
    scaled into a small range, no longer integer positions, which is the rule's own fix."""
    if isinstance(last, ast.AugAssign):
        return isinstance(last.op, ast.Div)
    return isinstance(last, ast.Assign) and isinstance(last.value, ast.BinOp) and isinstance(last.value.op, ast.Div)


def _drawn_exact(ctx: Context, last: ast.stmt | None, dtypes: frozenset) -> bool:
    """The name's last assignment draws integers the cast dtype holds exactly: ``torch.randint(low, high)`` (a
    `.repeat`/`.to` after it kept) with `high` a literal within the dtype's exact range, or, for fp16 alone, a
    diffusion scheduler's ``num_train_timesteps`` (1000 in the common schedulers, below fp16's 2048)."""
    if not isinstance(last, ast.Assign):
        return False
    value = last.value
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and isinstance(value.func.value, ast.Call):
        value = value.func.value
    if not (isinstance(value, ast.Call) and ctx.qualname(value.func) == "torch.randint"):
        return False
    # randint([low,] high, size): the size is the last positional argument unless given by keyword
    bounds = value.args[:len(value.args) - (0 if keyword(value, "size") is not None else 1)]
    high = keyword(value, "high") or (bounds[-1] if bounds else None)
    limit = min(EXACT_INT[d] for d in dtypes if d in EXACT_INT)
    if isinstance(high, ast.Constant) and isinstance(high.value, int):
        return high.value <= limit
    return dtypes == frozenset({FP16}) and (dotted(high) or "").endswith("num_train_timesteps")


@code_check("AMP103", triggers=HALF_WORDS, also=(("arange", "linspace", "range(", "pos", "timestep", " t."),))
def low_precision_positions(ctx: Context) -> Iterator[CodeHit]:
    # pytorch #137774: bf16 holds integers exactly only up to 256, fp16 up to 2048.
    for call, dtypes, like in _position_casts(ctx):
        name = ctx.qualname(call.func)
        root = call if name in POSITION_FACTORIES else _factory_root(ctx, call) if name is None else None
        if root is not None:
            said = _made_in_half(ctx, call, root, dtypes, like)
            if said:
                yield call, said
            continue
        if name is not None or not isinstance(call.func, ast.Attribute):
            continue
        receiver = call.func.value
        holds, by_name = _holds_positions(ctx, call, receiver)
        if not holds:
            continue
        last = _last_assignment(ctx, receiver, call)
        if not _divided_before(last) and not _drawn_exact(ctx, last, dtypes):
            message = f"position/timestep tensor `{ast.unparse(receiver)[:60]}` is cast to {describe(dtypes)}{like} before use"
            # read from a name or another tensor's dtype, in code that does not train: a note (a sampler's timesteps
            # are rounded as the model may have been trained with them)
            yield (call, message, Severity.INFO) if (by_name or like) and not runs_training_loop(ctx.src.text) else (call, message)


def _factory_root(ctx: Context, call: ast.Call) -> ast.Call | None:
    """The position factory a chain of method calls cast starts from (``torch.arange(n).to(dev).half()``), if any."""
    root = call.func.value if isinstance(call.func, ast.Attribute) else None
    while isinstance(root, ast.Call) and isinstance(root.func, ast.Attribute) and ctx.qualname(root.func) is None:
        root = root.func.value
    return root if isinstance(root, ast.Call) and ctx.qualname(root.func) in POSITION_FACTORIES else None


def _made_in_half(ctx: Context, call: ast.Call, root: ast.Call, dtypes: frozenset, like: str) -> str | None:
    """What to say of positions the factory `root` makes in half (`call` itself) or that `call`, a cast of its
    result, makes half, where they are whole numbers past the dtype's exact range; None where they are not."""
    if not _spans_positions(ctx, root) or _small_range(root, dtypes):
        return None
    if root is call:
        return f"`{ctx.qualname(call.func)}` in {describe(dtypes)}{like} cannot represent positions exactly (bf16 > 256, fp16 > 2048)"
    limit = min(EXACT_INT[d] for d in dtypes if d in EXACT_INT)
    return (f"positions from `{ctx.qualname(root.func)}` are cast to {describe(dtypes)}, which holds whole numbers exactly "
            f"only up to {limit}: any position past that is rounded")


def _holds_positions(ctx: Context, call: ast.Call, receiver: ast.AST) -> tuple[bool, bool]:
    """Do the words of the cast tensor say positions or timesteps (and not embeddings, masks or a rotary table)? Its
    own chain's words, or, where they say nothing of positions, the name the cast value is stored under
    (``timestep = t.expand(n).to(dtype)``), unless it is made from a noise level (``sigmas.view(-1, 1)``, in [0, 1],
    no integer timestep). The second value: whether the stored name was what said so."""
    words = chain_words(receiver, ctx, calls_too=False)
    by_name = False
    if not words & POSITION_TOKENS - {"ids"} and not words & NOT_POSITIONS:
        stored = assigned_name(ctx, call)
        if stored and not (isinstance(receiver, (ast.Call, ast.Attribute, ast.Subscript, ast.Name)) and tokens(_root_name(receiver)) & _NOISE_LEVELS):
            words, by_name = words | tokens(stored), True
    return bool(words & POSITION_TOKENS - {"ids"}) and not words & NOT_POSITIONS and not words & ROPE_WORDS, by_name


# Names of a diffusion noise level: a fraction in [0, 1], which a half dtype rounds by its relative precision only.
_NOISE_LEVELS = frozenset({"sigma", "sigmas"})


def _root_name(expr: ast.AST) -> str:
    """The name a chain of methods, attributes and indexing starts from: ``sigmas.view(-1, 1).expand(n)`` -> sigmas."""
    for _ in range(16):
        if isinstance(expr, ast.Call):
            expr = expr.func
        elif isinstance(expr, (ast.Attribute, ast.Subscript)):
            expr = expr.value
        else:
            break
    return expr.id if isinstance(expr, ast.Name) else ""


_FACTORY_NAMES = frozenset(name.rsplit(".", 1)[1] for name in POSITION_FACTORIES)


def _position_casts(ctx: Context) -> Iterator[tuple[ast.Call, frozenset, str]]:
    """Casts to bf16/fp16 (`half_casts`), each with how the dtype is known: said by the cast (""), or, for a cast to
    another tensor's dtype (``.to(latents.dtype)``, ``.type_as(latents)``, ``torch.arange(n, dtype=x.dtype)``), that
    tensor's half dtype the code fixes (``latents = torch.randn(..., dtype=torch.bfloat16)``), named in the message."""
    seen = set()
    for call, dtypes in half_casts(ctx):
        seen.add(call)
        yield call, dtypes, ""
    for call in ctx.src.calls:
        func = call.func
        if not isinstance(func, ast.Attribute) or not (call.args or call.keywords):
            continue
        if func.attr in ("to", "type", "type_as"):
            other = _dtype_source(call, func.attr)
        elif func.attr in _FACTORY_NAMES and ctx.qualname(func) in POSITION_FACTORIES:
            given = keyword(call, "dtype")  # ``torch.arange(n, dtype=x.dtype)``
            other = given.value if isinstance(given, ast.Attribute) and given.attr == "dtype" else None
        else:
            continue
        if other is None:
            continue
        scope = ctx.src.scope(call)
        dtypes = ctx.flow.tensor_dtype(other, scope) or _made_in(ctx, other, scope, call.lineno)
        if dtypes and dtypes <= HALF and call not in seen:  # every dtype it may hold is half: a cast to half on every path
            yield call, dtypes, f" (the dtype of `{ast.unparse(other)[:40]}`)"


def _made_in(ctx: Context, expr: ast.AST, scope: ast.AST, line: int) -> frozenset | None:
    """The dtype a helper made the tensor `expr` names in: its last binding before `line` calls a function handed
    one dtype, a literal one (``latents = prepare_latents(b, c, h, w, torch.bfloat16, device)``,
    ``randn_tensor(shape, dtype=torch.float16)``): what a function asked for one dtype returns is in it."""
    if not isinstance(expr, ast.Name):
        return None
    before = [(n, v) for n, v in ctx.src.bindings(expr, scope) if n < line and v is not None]
    value = before[-1][1] if before else None
    if not isinstance(value, ast.Call) or (ctx.qualname(value.func) or "").startswith("torch."):
        return None  # torch's own functions are the dataflow's
    given = [found for arg in (*value.args, *(k.value for k in value.keywords))
             if isinstance(arg, (ast.Attribute, ast.Name)) and (found := ctx.flow.dtype_of(arg, scope))]
    return given[0] if len(given) == 1 else None


def _dtype_source(call: ast.Call, method: str) -> ast.AST | None:
    """The tensor whose dtype a cast takes: ``.type_as(x)``, ``.to(x.dtype)``, ``.to(device, x.dtype)``,
    ``.to(dtype=x.dtype)``; None for any other cast."""
    if method == "type_as":
        return call.args[0] if call.args else None
    for arg in (keyword(call, "dtype"), *call.args[:2]):
        if isinstance(arg, ast.Attribute) and arg.attr == "dtype":
            return arg.value
    return None


@runtime_check("AMP103")
def half_positions(ctx: RuntimeContext) -> Iterator[Hit]:
    t = ctx.trace
    # Positions exist in the forward pass only: integer-valued tensors cast in backward are scaled gradients
    # (a GradScaler's 65536), and in the optimizer step counters.
    # autocast's own cast of fp32 positions for an angle matmul is AMP101's: the code kept them fp32
    autocast = {cast for cast, _ in ctx.autocast_angles.values()}
    hits = [op.seq for op in t.tagged(Tag.POSITIONS) if op.phase == Phase.FORWARD and op.seq not in autocast]
    for _, seqs in ctx.grouped(hits, lambda s: (t.op_at(s).module, t.line(s))).items():
        first = seqs[0]
        _, top, kind = t.op_at(first).extra
        dt = name_of(t.out_dtype(first))
        yield Hit(f"integer values up to {top:g} {'created by arange' if kind == 'arange' else 'cast'} in {dt}, which is exact only up to "
                  f"{EXACT_INT[dt]}: neighbouring positions collapse", t.location(first), details={"max": top, "dtype": dt})
