"""Checks on rotary embeddings and positions: the tables, the integer positions they are built from, and the
dtypes a rotary kernel is handed."""

from __future__ import annotations

import ast
from typing import Iterator

from ampdoctor.lint.python.checks import Context, Hit, check
from ampdoctor.lint.python.dataflow import BF16, FP32, HALF, describe
from ampdoctor.lint.python.facts import ROPE_TOKENS
from ampdoctor.lint.python.resolve import last_identifier, tokens

# Without one of these a file names no half dtype the dataflow could resolve.
HALF_WORDS = ("bfloat16", "float16", ".half()", "torch.half", "bf16\"", "bf16'", "fp16\"", "fp16'")
ROPE_WORDS = ("cos", "sin", "freq", "rope", "rotary", "Rotary", "cis", "theta")
POSITION_TOKENS = frozenset({"pos", "position", "positions", "timestep", "timesteps", "ids"})
NOT_POSITIONS = frozenset({"emb", "embed", "embeds", "embedding", "embeddings", "enc", "encoding", "encodings", "bias",
                           "weight", "weights", "mask", "input", "token", "tokens", "layer", "head"})
NOT_ROPE = frozenset({"sim", "similarity", "loss", "cossim", "dist", "distance", "schedule", "scheduler", "lr"})
POSITION_FACTORIES = frozenset({"torch.arange", "torch.linspace", "torch.range"})
TRIG = frozenset({"torch.cos", "torch.sin", "torch.polar"})
COMBINE = frozenset({"torch.cat", "torch.stack", "torch.outer", "torch.einsum"})
# On autocast's lower-precision lists (CUDA: all four; CPU: einsum only when it contracts, through bmm).
ANGLE_MATMULS = frozenset({"torch.matmul", "torch.mm", "torch.bmm", "torch.einsum"})


def chain_words(expr: ast.AST, ctx: Context, *, calls_too: bool = True) -> frozenset[str]:
    """Identifier tokens along a receiver chain: ``self.freqs.cos().to(x)`` -> {self, freqs, cos, to}.
    Arguments of torch.cat/stack/outer count, since a table built from cos/sin pieces is still a table."""
    words: set[str] = set()
    node = expr
    for _ in range(32):
        if isinstance(node, ast.Name):
            words |= tokens(node.id)
            break
        if isinstance(node, ast.Attribute):
            words |= tokens(node.attr)
            node = node.value
        elif isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Call) and calls_too:
            name = ctx.qualname(node.func)
            if name in TRIG:
                words.add("cos")
            if name in COMBINE:
                for arg in node.args:
                    for elt in arg.elts if isinstance(arg, (ast.List, ast.Tuple)) else [arg]:
                        words |= chain_words(elt, ctx)
                break
            if name is not None:
                break
            node = node.func
        else:
            break
    return frozenset(words)


def is_table(words: frozenset[str]) -> bool:
    return bool(words & ROPE_TOKENS) and not words & NOT_ROPE and not words & POSITION_TOKENS - {"ids"}


def half_casts(ctx: Context) -> Iterator[tuple[ast.Call, frozenset]]:
    """Calls that cast to, or create in, bf16/fp16 (maybe: ``.to(dtype)`` with dtype bf16 on some path)."""
    for call in ctx.src.calls:
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr not in ("to", "type", "half", "bfloat16"):
            if ctx.qualname(func) is None:
                continue
        dtypes = ctx.flow.cast_dtype(call, None)
        if dtypes and dtypes & HALF:
            yield call, dtypes


def assigned_name(ctx: Context, call: ast.Call) -> str | None:
    """The name a value is stored under: an assignment target or a ``register_buffer("name", value)``."""
    parent = ctx.src.parents.get(call)
    child: ast.AST = call
    if isinstance(parent, ast.Tuple):
        grand = ctx.src.parents.get(parent)
        if isinstance(grand, ast.Assign) and len(grand.targets) == 1 and isinstance(grand.targets[0], ast.Tuple):
            target = grand.targets[0]
            if len(target.elts) == len(parent.elts):
                return last_identifier(target.elts[parent.elts.index(child)])
        return None
    if isinstance(parent, (ast.Assign, ast.AnnAssign)):
        targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
        return last_identifier(targets[0]) if len(targets) == 1 else None
    if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Attribute) and parent.func.attr == "register_buffer":
        if len(parent.args) >= 2 and parent.args[1] is call and isinstance(parent.args[0], ast.Constant):
            return str(parent.args[0].value)
    return None


@check("rope-cache-low-precision", triggers=HALF_WORDS, also=(ROPE_WORDS,))
def rope_cache_low_precision(ctx: Context) -> Iterator[Hit]:
    # Incident 2 (modded-nanogpt #39): `self.cos_cached = freqs.cos().bfloat16()`.
    for call, dtypes in half_casts(ctx):
        receiver = call.func.value if isinstance(call.func, ast.Attribute) and ctx.qualname(call.func) is None else None
        stored = assigned_name(ctx, call)
        if receiver is not None and is_table(chain_words(receiver, ctx)):
            what = f"`{ast.unparse(receiver)[:60]}`"
        elif stored is not None and is_table(tokens(stored)):
            what = f"`{stored}`"
        else:
            continue
        yield call, f"RoPE table {what} is cast to {describe(dtypes)}; keep cos/sin/inv_freq in float32"


def _small_range(call: ast.Call, dtypes: frozenset) -> bool:
    limit = 256 if "bf16" in dtypes else 2048
    bounds = [a for a in call.args[:2]]
    return bool(bounds) and all(isinstance(b, ast.Constant) and isinstance(b.value, (int, float)) and abs(b.value) <= limit for b in bounds)


@check("low-precision-positions", triggers=HALF_WORDS, also=(("arange", "linspace", "range(", "pos", "timestep", " t."),))
def low_precision_positions(ctx: Context) -> Iterator[Hit]:
    # B3 (pytorch #137774): bf16 holds integers exactly only up to 256, fp16 up to 2048.
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
                yield call, f"positions from `{ctx.qualname(root.func)}` are cast to {describe(dtypes)}, which cannot represent them exactly"
            continue
        words = chain_words(receiver, ctx, calls_too=False)
        if words & POSITION_TOKENS - {"ids"} and not words & NOT_POSITIONS and not words & ROPE_TOKENS:
            yield call, f"position/timestep tensor `{ast.unparse(receiver)[:60]}` is cast to {describe(dtypes)} before use"


@check("rope-dtype-mismatch", triggers=("rotary", "rope", "Rotary", "RoPE"),
       also=(("float()", "float32", "torch.float", "double()", "bfloat16", "float16", ".half()"),))
def rope_dtype_mismatch(ctx: Context) -> Iterator[Hit]:
    # Incident 5 (transformers #38451): `apply_rotary_emb(tensor.float(), cos, sin)` with bf16 cos/sin.
    for call in ctx.src.calls:
        ident = last_identifier(call.func) or ""
        if not tokens(ident) & {"rotary", "rope"} or ident[:1].isupper() or (ctx.qualname(call.func) or "").startswith("torch."):
            continue
        scope = ctx.src.scope(call)
        args = [*call.args, *(kw.value for kw in call.keywords if kw.arg)]
        tables = [a for a in args if is_table(chain_words(a, ctx)) or (isinstance(a, ast.Call) and (last_identifier(a.func) or "") in ("cos", "sin"))]
        inputs = [a for a in args if a not in tables and isinstance(a, (ast.Name, ast.Attribute, ast.Call, ast.Subscript))]
        if not tables or not inputs:
            continue
        for x in inputs:
            x_dtype = ctx.flow.tensor_dtype(x, scope)
            if not x_dtype:
                continue
            for table in tables:
                t_dtype = ctx.flow.tensor_dtype(table, scope)
                if (x_dtype == FP32 and t_dtype != FP32) or (t_dtype and t_dtype != x_dtype and len(x_dtype | t_dtype) == 2):
                    t_text = describe(t_dtype) if t_dtype else "not cast (the model dtype, bf16 under bf16 training)"
                    yield call, (f"rotary input `{ast.unparse(x)[:40]}` is {describe(x_dtype)} but `{ast.unparse(table)[:40]}` is "
                                 f"{t_text}; cast the tables with `.type_as({ast.unparse(x)[:40]})`")
                    break
            else:
                continue
            break


@check("tf32-rope-angles", triggers=("set_float32_matmul_precision", "allow_tf32"))
def tf32_rope_angles(ctx: Context) -> Iterator[Hit]:
    # B4 (transformers #48428): TF32 keeps 10 mantissa bits, so positions > 2048 are truncated in the angle matmul.
    where = ctx.facts.tf32_matmuls
    if where is None:
        return
    for node in angle_matmuls(ctx):
        yield node, f"RoPE angles are a matmul while TF32 is allowed for fp32 matmuls (line {where.lineno}); use an elementwise outer product"


def angle_matmuls(ctx: Context) -> Iterator[ast.AST]:
    """Matrix products with an inv_freq/freqs operand: ``inv_freq @ position_ids``, ``torch.einsum("i,j->ij", t, freqs)``."""
    operands: list[tuple[ast.AST, list[ast.AST]]] = [(m, [m.left, m.right]) for m in ctx.src.matmuls]
    for call in ctx.src.calls:
        if ctx.qualname(call.func) in ANGLE_MATMULS:
            operands.append((call, [a for a in call.args if not isinstance(a, ast.Constant)]))
    for node, parts in operands:
        words = [chain_words(p, ctx) for p in parts]
        if any(w & {"freq", "freqs", "inv"} and not w & NOT_ROPE for w in words):
            yield node


def _rotary_functions(ctx: Context) -> set[ast.AST]:
    """Functions (or the module, for top-level code) that take cos/sin of something, and the methods of classes
    named like a rotary embedding."""
    found: set[ast.AST] = set()
    for call in ctx.src.calls:
        name = ctx.qualname(call.func)
        if name in TRIG if name else isinstance(call.func, ast.Attribute) and call.func.attr in ("cos", "sin"):
            found.add(ctx.src.enclosing_function(call) or ctx.src.tree)
    for cls in ctx.src.classes:
        if tokens(cls.name) & {"rotary", "rope"} or "RoPE" in cls.name:
            found.update(s for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)))
    return found


@check("rope-under-autocast", triggers=("freq",), also=(("@", "matmul", "mm(", "einsum"), ("autocast", "mixed_precision", "precision=", "bf16=", "fp16=")))
def rope_under_autocast(ctx: Context) -> Iterator[Hit]:
    # B1 (transformers PR #29285, diffusers PR #13922). Autocast's lower-precision list has matmul/mm/bmm and, on
    # CUDA, einsum: `.float()` on both operands does not help, the product is still bf16. An elementwise product
    # (`pos[..., None] * inv_freq`, `torch.outer`) is not on the list and stays fp32, so only matmuls are reported.
    # Conservative: a library model file that never mentions autocast is not reported; the file has to enable
    # autocast or mixed precision, or disable autocast around other code (so it is meant to run under autocast).
    facts = ctx.facts
    if facts.mixed_precision:
        evidence = f"this file enables autocast or mixed precision (line {facts.mixed_precision[0].lineno})"
    elif facts.autocast_disabled:
        evidence = f"this file runs under autocast: it disables it elsewhere (line {facts.autocast_disabled[0].lineno})"
    else:
        return
    rotary = None
    for node in angle_matmuls(ctx):
        if rotary is None:
            rotary = _rotary_functions(ctx)
        if (ctx.src.enclosing_function(node) or ctx.src.tree) not in rotary or facts.autocast_off_at(node):
            continue
        yield node, (f"RoPE angles `{ast.unparse(node)[:60]}` are a matmul, which autocast runs in bf16/fp16 even on fp32 "
                     f"operands; {evidence}. Compute them inside `torch.autocast(device_type, enabled=False)`")
