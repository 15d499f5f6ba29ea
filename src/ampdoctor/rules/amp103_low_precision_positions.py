"""AMP103 low-precision-positions: Integer positions or timesteps are held in bf16/fp16, which cannot represent them exactly.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP103`)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

from ampdoctor.audit.evidence import Phase, Tag
from ampdoctor.core.registry import Hit, code_check, runtime_check
from ampdoctor.dtypes import EXACT_INT, FP16, ROPE_WORDS, name_of
from ampdoctor.lint.python.context import HALF_WORDS, POSITION_FACTORIES, POSITION_TOKENS, CodeHit, Context, chain_words, half_casts
from ampdoctor.lint.python.dataflow import describe
from ampdoctor.lint.python.resolve import dotted, keyword

if TYPE_CHECKING:
    from ampdoctor.audit.analysis import RuntimeContext

# Identifier words of tensors that hold embeddings or masks, not positions, although named after them.
NOT_POSITIONS = frozenset({"emb", "embed", "embeds", "embedding", "embeddings", "enc", "encoding", "encodings", "bias",
                           "weight", "weights", "mask", "input", "token", "tokens", "layer", "head"})


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
    for call, dtypes in half_casts(ctx):
        name = ctx.qualname(call.func)
        if name in POSITION_FACTORIES:
            if not _small_range(call, dtypes):
                yield call, f"`{name}` in {describe(dtypes)} cannot represent positions exactly (bf16 > 256, fp16 > 2048)"
            continue
        if name is not None or not isinstance(call.func, ast.Attribute):
            continue
        receiver = call.func.value
        root = receiver
        while isinstance(root, ast.Call) and isinstance(root.func, ast.Attribute) and ctx.qualname(root.func) is None:
            root = root.func.value
        if isinstance(root, ast.Call) and ctx.qualname(root.func) in POSITION_FACTORIES:
            if not _small_range(root, dtypes):
                limit = min(EXACT_INT[d] for d in dtypes if d in EXACT_INT)
                yield call, (f"positions from `{ctx.qualname(root.func)}` are cast to {describe(dtypes)}, which holds whole "
                             f"numbers exactly only up to {limit}: any position past that is rounded")
            continue
        words = chain_words(receiver, ctx, calls_too=False)
        if not words & POSITION_TOKENS - {"ids"} or words & NOT_POSITIONS or words & ROPE_WORDS:
            continue
        last = _last_assignment(ctx, receiver, call)
        if not _divided_before(last) and not _drawn_exact(ctx, last, dtypes):
            yield call, f"position/timestep tensor `{ast.unparse(receiver)[:60]}` is cast to {describe(dtypes)} before use"


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
