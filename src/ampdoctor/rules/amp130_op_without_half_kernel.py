"""AMP130 op-without-half-kernel: An op has no kernel for bf16/fp16 on this device, so the step fails where the half tensor reaches it.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP130`)."""

from __future__ import annotations

import ast
from typing import Iterator

from ampdoctor.core.model import Severity
from ampdoctor.core.registry import code_check
from ampdoctor.lint.python.context import FLOAT_UP, HALF_WORDS, CodeHit, Context, half_dtypes_run
from ampdoctor.lint.python.dataflow import BF16, FACTORIES, HALF, describe, torch_factory
from ampdoctor.lint.python.project import WEIGHTS_FP32_SAID
from ampdoctor.lint.python.resolve import keyword, tokens
from ampdoctor.lint.python.source import parameters

# A guard's verdict: the half dtypes its truth admits (None: it tests no dtype), and whether it also requires a CPU tensor.
Coverage = tuple[frozenset | None, bool]

# Decompositions and solvers: LAPACK/cuSOLVER have float and double only, so torch has no half kernel for them on
# any device ("linalg_svd_cpu" not implemented for 'BFloat16', "Low precision dtypes not supported").
_LINALG = frozenset(
    {f"torch.linalg.{n}" for n in ("svd", "svdvals", "qr", "eigh", "eig", "eigvals", "eigvalsh", "inv", "inv_ex", "solve",
                                   "solve_ex", "cholesky", "cholesky_ex", "lstsq", "det", "slogdet", "pinv", "lu", "lu_factor",
                                   "cond", "matrix_rank", "solve_triangular", "householder_product", "ldl_factor",
                                   "tensorinv", "tensorsolve")}
    | {f"torch.{n}" for n in ("svd", "qr", "inverse", "cholesky", "det", "logdet", "pinverse", "svd_lowrank", "pca_lowrank",
                              "triangular_solve", "cholesky_solve", "cholesky_inverse", "geqrf")}
    # quantile checks its input's dtype before any kernel: "quantile() input tensor must be either float or double
    # dtype", on every device
    | {"torch.quantile", "torch.nanquantile"})
# FFTs: pocketfft and cuFFT have no bf16 transform; fp16 is cuFFT-only, for power-of-two sizes, into the experimental
# complex32 ("Unsupported dtype Half"/"BFloat16" elsewhere).
_FFT = frozenset(f"torch.fft.{n}" for n in ("fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2",
                                            "irfft2", "rfftn", "irfftn", "hfft", "ihfft"))
# Words of a module weight: a model's weights are half when the model is.
_WEIGHT_WORDS = frozenset({"weight", "weights"})
# What a tensor says of itself that is no tensor in its dtype (sizes, places, the dtype itself)
_METADATA = frozenset({"shape", "device", "dtype", "ndim", "is_cuda", "layout"})
_METADATA_CALLS = frozenset({"size", "dim", "numel", "nelement", "element_size", "get_device", "stride", "data_ptr"})
# torch functions that make a new tensor from sizes or values (the `_like` ones take their operand's dtype)
_NEW_TENSORS = FACTORIES - {"tensor", "as_tensor"} - {f for f in FACTORIES if f.endswith("_like")}


# Words one of the ops above leaves in a file's text (the FFTs', "fft", are added where FFTs are read).
_OP_TRIGGERS = ("linalg", "torch.svd", "torch.qr", "torch.inverse", "torch.cholesky", "svd_lowrank", "quantile",
                "triangular_solve", "geqrf")


@code_check("AMP130", triggers=_OP_TRIGGERS, also=(HALF_WORDS,), project=True)
def decomposition_of_half_weights(ctx: Context) -> Iterator[CodeHit]:
    # peft PR #3410 and others: an SVD or solve of adapter or layer weights in code that handles half models; the
    # decomposition has no half kernel, and the code fails exactly for the fp16/bf16 models it was written for.
    for call in ctx.src.calls:
        name = ctx.qualname(call.func)
        if name not in _LINALG or not call.args:
            continue
        operand = call.args[0]
        scope = ctx.src.scope(call)
        dtypes = ctx.flow.tensor_dtype(operand, scope)
        if dtypes and dtypes <= FLOAT_UP:
            continue
        short = name.replace("torch.", "", 1)
        if _stale_upcast(ctx, operand, call, scope) is not None:
            continue  # partial_half_guard reports it at the upcast that came too late
        if dtypes and dtypes & HALF:
            yield call, f"`{short}` has no {describe(dtypes & HALF)} kernel on any device, and `{ast.unparse(operand)[:40]}` is {describe(dtypes & HALF)}; upcast with `.float()` first"
        elif (half := _half_on_path(ctx, call)) is not None and _from_weights(ctx, operand, scope, 0):
            # a warning: the weights are half only when the model is, which this file allows but does not fix; a
            # note where no file of the project makes a model half (autocast keeps the weights fp32)
            said = (f"`{short}` has no bf16/fp16 kernel on any device, and `{ast.unparse(operand)[:40]}` is built from layer "
                    f"weights, which are half in a half-precision model (this file handles half dtypes: line "
                    f"{half.lineno}); upcast with `.float()` first")
            if ctx.project.weights_fp32:
                yield call, f"{said}; {WEIGHTS_FP32_SAID}, so its own runs keep these weights fp32", Severity.INFO
            else:
                yield call, said, Severity.WARNING


# interpolate with `antialias=True`: no bf16/fp16 kernel on CPU (pytorch #175489: "compute_index_ranges_weights" not
# implemented, still so in torch 2.13). (Without antialias the half gaps were CUDA bf16 in torch 1.x, pytorch #86679,
# #88536: a file's fp32 round trip around a plain resize says nothing of torch today, so those are not followed.)
_INTERPOLATE = frozenset({"torch.nn.functional.interpolate"})


@code_check("AMP130", triggers=(*_OP_TRIGGERS, "fft", "interpolate"), also=(".float()", "float32"))
def upcast_in_one_place_only(ctx: Context) -> Iterator[CodeHit]:
    # timm (pos embed resample, issue #1811): one function of the file rebinds its input to fp32 before `interpolate`
    # and casts back, because a half input fails there; its sibling hands the same kind of input to the same op uncast.
    # The file itself says its inputs of that op can be half: the uncast call fails for them.
    upcast: dict[str, tuple[ast.Call, ast.Assign]] = {}
    plain: list[tuple[ast.Call, str]] = []
    for call in ctx.src.calls:
        name = ctx.qualname(call.func)
        if not (name in _LINALG or name in _FFT or name in _INTERPOLATE and _antialiased(ctx, call)) or not call.args:
            continue
        scope = ctx.src.scope(call)
        fn = ctx.src.enclosing_function(call)
        dtypes = ctx.flow.tensor_dtype(call.args[0], scope)
        rebind = _round_trip(ctx, call, fn) if fn is not None else None
        if dtypes and dtypes <= FLOAT_UP:
            if rebind is not None:
                upcast.setdefault(name, (call, rebind))
        elif not dtypes and fn is not None and rebind is None and not _upcast_guards(ctx, call.args[0], call, scope):
            plain.append((call, name))
    for call, name in plain:
        if name not in upcast or ctx.src.enclosing_function(upcast[name][0]) is ctx.src.enclosing_function(call):
            continue
        other, rebind = upcast[name]
        short = name.replace("torch.nn.functional.", "F.").replace("torch.", "", 1)
        gap = ("has no bf16/fp16 kernel on CPU with `antialias=True`" if name in _INTERPOLATE else "has no bf16/fp16 kernel on any device" if name in _LINALG
               else "has no bf16 kernel (fp16 only on CUDA, power-of-two sizes)")
        yield call, (f"`{short}` at line {other.lineno} is given its input in fp32 (`{ast.unparse(rebind)[:50]}`, line "
                     f"{rebind.lineno}): this file's inputs of `{short}` can be half, and `{short}` {gap}; here "
                     f"`{ast.unparse(call.args[0])[:40]}` reaches it uncast: upcast it the same way"), Severity.WARNING


def _antialiased(ctx: Context, call: ast.Call) -> bool:
    """``antialias=True``, or ``antialias=antialias`` with a parameter of the function that defaults to True."""
    value = keyword(call, "antialias")
    if isinstance(value, ast.Constant):
        return value.value is True
    fn = ctx.src.enclosing_function(call)
    if not isinstance(value, ast.Name) or fn is None:
        return False
    return any(a.arg == value.id and isinstance(d, ast.Constant) and d.value is True for a, d in parameters(fn.args))


def _round_trip(ctx: Context, call: ast.Call, fn: ast.AST) -> ast.Assign | None:
    """The upcast ``x = x.float()`` in `fn` before `call` when `fn` also saves a dtype (``orig = x.dtype``) to cast
    back to: the fp32 is there for the op, not the data (a tensor the function makes in fp32 needs no round trip)."""
    saves = any(isinstance(n, ast.Assign) and isinstance(n.value, ast.Attribute) and n.value.attr == "dtype"
                for n in ast.walk(fn))
    if not saves:
        return None
    scope = ctx.src.scope(call)
    return next((n for n in ast.walk(fn) if isinstance(n, ast.Assign) and len(n.targets) == 1
                 and isinstance(n.targets[0], ast.Name) and n.lineno < call.lineno and _is_upcast(ctx, n, scope)), None)


def _half_on_path(ctx: Context, call: ast.Call) -> ast.AST | None:
    """The first half dtype of the file that can run in the same pass as `call`: one only on the other side of an
    ``if`` (the inverse path's ``.half()`` beside a forward path's ``logdet``) says nothing of the weights here."""
    return next((p for p in ctx.facts.half_places() if not ctx.src.exclusive(p, call)), None)


def _from_weights(ctx: Context, expr: ast.AST, scope: ast.AST, hops: int) -> bool:
    """Is `expr` computed from a module's weights, with no upcast on the way (the last binding of each name)?
    `hops` counts the names followed back to their bindings: the expression's own structure is finite."""
    if isinstance(expr, ast.Call):
        return _call_from_weights(ctx, expr, scope, hops)
    if isinstance(expr, ast.BinOp):
        return _from_weights(ctx, expr.left, scope, hops) or _from_weights(ctx, expr.right, scope, hops)
    if isinstance(expr, ast.Subscript):
        return _from_weights(ctx, expr.value, scope, hops)
    if isinstance(expr, ast.Attribute):
        if expr.attr in _METADATA:
            return False  # a weight's shape or device is no tensor of its dtype
        return bool(tokens(expr.attr) & _WEIGHT_WORDS) or _from_weights(ctx, expr.value, scope, hops)
    if isinstance(expr, ast.Name) and hops < 4:
        before = [b for b in ctx.src.bindings(expr, scope) if b[0] < getattr(expr, "lineno", 0)]
        if not before or before[-1][1] is None:
            return False
        return _from_weights(ctx, before[-1][1], scope, hops + 1)
    return False


def _call_from_weights(ctx: Context, call: ast.Call, scope: ast.AST, hops: int) -> bool:
    """`_from_weights` of a call: its operand or first arguments are, and it neither upcasts nor reads sizes."""
    if (ctx.flow.cast_dtype(call, scope) or frozenset()) & FLOAT_UP:
        return False
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in _METADATA_CALLS:
        return False
    if torch_factory(ctx.qualname(func)) in _NEW_TENSORS:
        # a new tensor has the default dtype, or the one it is given: its arguments are sizes and places
        given = keyword(call, "dtype")
        return isinstance(given, ast.Attribute) and given.attr == "dtype" and _from_weights(ctx, given.value, scope, hops)
    base = func.value if isinstance(func, ast.Attribute) else None
    return any(_from_weights(ctx, a, scope, hops) for a in ([base] if base is not None else []) + list(call.args[:2]))


@code_check("AMP130", triggers=(*_OP_TRIGGERS, "fft", "dtype"), also=(HALF_WORDS,))
def partial_half_guard(ctx: Context) -> Iterator[CodeHit]:
    # diffusers PR #13503 (FFT upcast for bf16 only), peft PR #3087 (solver upcast on CPU only), peft PR #3364 (a CPU
    # merge guard for fp16 where the file's other guards name bf16 too): the code knows the op needs fp32 and upcasts
    # for some half inputs, and the others reach it in half.
    reported: set[ast.If] = set()
    for call in ctx.src.calls:
        name = ctx.qualname(call.func)
        if name not in _LINALG and name not in _FFT or not call.args:
            continue
        scope, short = ctx.src.scope(call), name.replace("torch.", "", 1)
        guards = [(g, _coverage(ctx, g.test, scope)) for g in _upcast_guards(ctx, call.args[0], call, scope)]
        guards = [(g, c) for g, c in guards if c[0] is not None]
        if not guards:
            stale = _stale_upcast(ctx, call.args[0], call, scope)
            if stale is not None and stale[0] not in reported:
                guard, derived, source, line = stale
                reported.add(guard)
                yield _test_site(ctx, guard.test, scope), (
                    f"this upcast of `{source}` for half dtypes comes after `{derived}` was computed from it (line {line}): "
                    f"`{derived}` stays half and reaches `{short}` (line {call.lineno}), which has no "
                    f"bf16/fp16 kernel; upcast `{derived}` too, or compute it after the upcast"), Severity.WARNING
            continue
        admitted = frozenset().union(*(c[0] for _, c in guards if not c[1]))
        missing, guard = HALF - admitted, guards[-1][0]
        if not BF16 & half_dtypes_run(ctx):
            # fp16 is what autocast and `.half()` give by default; bf16 reaches the op only where something asks for
            # it: a guard for fp16 alone is whole in code that never runs in bf16
            missing -= BF16
        # reported at the guard's condition: that is what is incomplete, and where the fix goes (once per guard)
        site = _test_site(ctx, guard.test, scope)
        if guard in reported or (admitted and not missing):
            continue
        reported.update(g for g, _ in guards)  # the guard-consistency check below leaves these to this one
        if admitted:
            yield site, (f"this upcast is taken for {describe(admitted)} only, but `{short}` (line {call.lineno}) has no "
                         f"{describe(missing)} kernel{'' if name in _LINALG else ' (fp16 only on CUDA, power-of-two sizes)'}: a "
                         f"{describe(missing)} input reaches it uncast; upcast every non-fp32 dtype"), Severity.WARNING
        else:
            yield site, (f"this upcast is taken on CPU only, but `{short}` (line {call.lineno}) has no bf16/fp16 kernel on any "
                         "device: a half input on the GPU reaches it uncast; upcast on every device"), Severity.WARNING
    yield from _inconsistent_guards(ctx, reported)


def _inconsistent_guards(ctx: Context, skip: set[ast.If]) -> Iterator[CodeHit]:
    """A CPU upcast guard that admits one half dtype where another CPU guard of the file admits both: the file
    works around CPU half kernels for bf16 and fp16, and this copy forgot one of them. (Guards without a device
    condition are left alone: an fp16-only upcast against overflow, or a bf16-only one for a kernel, is often meant.)"""
    if not any(c.value == "cpu" for c in ctx.src.strings):
        return  # no device test in the file (the common case)
    # An upcast guard holds ``x = x.method()`` in its body (`_upcast_in`): the `if`s to read are the parents of those.
    ifs = {id(p): p for a in ctx.src.assigns if _rebinds_itself(a)
           and isinstance(p := ctx.src.parents.get(a), ast.If) and a in p.body and p not in skip}
    found = []
    for node in sorted(ifs.values(), key=lambda n: (n.lineno, n.col_offset)):
        if _upcast_in(ctx, node):
            admitted, cpu = _coverage(ctx, node.test, ctx.src.scope(node))
            if admitted and cpu:
                found.append((node, admitted))
    full = next((other for other, a in found if a == HALF), None)
    if full is None:
        return
    for node, admitted in found:
        if admitted == HALF:
            continue
        missing = HALF - admitted
        site = _test_site(ctx, node.test, ctx.src.scope(node))
        yield site, (f"this half guard upcasts {describe(admitted)} only, while the guard at line {full.lineno} upcasts for "
                     f"bf16 and fp16 alike: a {describe(missing)} tensor skips the upcast here and what the guard protects "
                     f"runs in {describe(missing)}"), Severity.WARNING


def _upcast_guards(ctx: Context, operand: ast.AST, call: ast.Call, scope: ast.AST, names: set[str] | None = None) -> list[ast.If]:
    """The `if`s before `call` in its scope that upcast a name the operand reads (or one of `names`) with
    ``x = x.float()``, when the call is outside them and no unconditional upcast of that name precedes it."""
    if names is None:
        names = {n.id for n in ast.walk(operand) if isinstance(n, ast.Name) and not _upcast_here(ctx, n, operand, scope)}
    guards = []
    for node in ast.walk(scope):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id in names and node.lineno < call.lineno and _is_upcast(ctx, node, scope)):
            continue
        parent = ctx.src.parents.get(node)
        if not isinstance(parent, ast.If) or node not in parent.body:
            return []  # upcast on every path (or in a loop or try, which this does not follow)
        if parent not in guards and call not in ast.walk(parent):
            guards.append(parent)
    return guards


def _stale_upcast(ctx: Context, operand: ast.AST, call: ast.Call, scope: ast.AST) -> tuple[ast.If, str, str, int] | None:
    """``merged = w + d`` then ``if <half dtype>: w = w.float()`` then ``svd(merged)``: the operand was computed from
    a name that a dtype guard upcasts only afterwards. (The guard, the operand's name, the name it read, its line.)"""
    if not isinstance(operand, ast.Name):
        return None
    before = [b for b in ctx.src.bindings(operand, scope) if b[0] < call.lineno]
    if not before or before[-1][1] is None or _upcast_guards(ctx, operand, call, scope):
        return None
    line, value = before[-1]
    if isinstance(value, ast.Call) and (ctx.flow.cast_dtype(value, scope) or frozenset()) & FLOAT_UP:
        return None
    for source in sorted({n.id for n in ast.walk(value) if isinstance(n, ast.Name)} - {operand.id}):
        for guard in _upcast_guards(ctx, operand, call, scope, {source}):
            if guard.lineno > line and _coverage(ctx, guard.test, scope)[0]:
                return guard, operand.id, source, line
    return None


def _upcast_here(ctx: Context, name: ast.Name, operand: ast.AST, scope: ast.AST) -> bool:
    """Is `name` read through an upcast inside the operand itself (``torch.inverse(eye + b.float())``)?"""
    if name is operand:
        return False
    for node in ctx.src.ancestors(name):
        if isinstance(node, ast.Call) and (ctx.flow.cast_dtype(node, scope) or frozenset()) & FLOAT_UP:
            return True
        if node is operand:
            return False
    return False


def _rebinds_itself(node: ast.stmt) -> bool:
    """``x = x.method(...)``: the shape of every upcast (`_is_upcast`), read without the dataflow."""
    if not isinstance(node, ast.Assign) or len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
        return False
    value = node.value
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and isinstance(value.func.value, ast.Name) \
        and value.func.value.id == node.targets[0].id


def _upcast_in(ctx: Context, guard: ast.If) -> bool:
    scope = ctx.src.scope(guard)
    return any(_is_upcast(ctx, s, scope) for s in guard.body)


def _is_upcast(ctx: Context, assign: ast.stmt, scope: ast.AST) -> bool:
    """``x = x.float()``, ``x = x.to(torch.float32)``: a name rebound to its own upcast."""
    if not _rebinds_itself(assign):
        return False
    dtypes = ctx.flow.cast_dtype(assign.value, scope)  # type: ignore[attr-defined]
    return bool(dtypes) and dtypes <= FLOAT_UP


def _test_site(ctx: Context, test: ast.expr, scope: ast.AST) -> ast.AST:
    """Where a guard's condition is written: a flag's last assignment (``cast = dev.type == "cpu" and ...``)."""
    if isinstance(test, ast.Name):
        before = [b for b in ctx.src.bindings(test, scope) if b[0] < test.lineno and b[1] is not None]
        if before:
            return before[-1][1]
    return test


def _coverage(ctx: Context, test: ast.expr, scope: ast.AST, depth: int = 0) -> Coverage:
    """What a guard's truth says about the tensor: the half dtypes it admits (None when it tests no dtype, or when
    an `or` lets any dtype through), and whether it requires a CPU tensor."""
    if depth > 4:
        return None, False
    if isinstance(test, ast.Name):
        site = _test_site(ctx, test, scope)
        return (None, False) if site is test else _coverage(ctx, site, scope, depth + 1)
    if isinstance(test, ast.BoolOp):
        parts = [_coverage(ctx, v, scope, depth + 1) for v in test.values]
        tested = [p[0] for p in parts if p[0] is not None]
        if isinstance(test.op, ast.And):
            return (frozenset.intersection(*tested) if tested else None), any(p[1] for p in parts)
        if len(tested) < len(parts):
            return None, False
        return frozenset().union(*tested), all(p[1] for p in parts)
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        return _compare_coverage(ctx, test, scope)
    return None, False


def _compare_coverage(ctx: Context, test: ast.Compare, scope: ast.AST) -> Coverage:
    """``x.device.type == "cpu"``; ``x.dtype == torch.bfloat16``, ``dtype in (torch.float16, torch.bfloat16)``,
    ``x.dtype != torch.float32``."""
    op, left, right = test.ops[0], test.left, test.comparators[0]
    if isinstance(op, (ast.Eq, ast.Is)) and any(isinstance(s, ast.Constant) and s.value == "cpu" for s in (left, right)):
        return None, True
    if not any(_names_dtype(s) for s in (left, right)):
        return None, False
    if isinstance(op, (ast.In, ast.NotIn)) and isinstance(right, (ast.Tuple, ast.List, ast.Set)):
        named = [ctx.flow.dtype_of(e, scope) for e in right.elts]
    else:
        named = [ctx.flow.dtype_of(right, scope) or ctx.flow.dtype_of(left, scope)]
    if not named or any(not n or len(n) != 1 for n in named):
        return None, False
    listed = frozenset().union(*named)
    if isinstance(op, (ast.Eq, ast.Is, ast.In)):
        return listed & HALF, False
    if isinstance(op, (ast.NotEq, ast.IsNot, ast.NotIn)):
        return HALF - listed, False
    return None, False


def _names_dtype(expr: ast.AST) -> bool:
    """``x.dtype``, ``dtype``, ``orig_dtype``: the side of a comparison that holds a tensor's dtype."""
    word = expr.attr if isinstance(expr, ast.Attribute) else expr.id if isinstance(expr, ast.Name) else ""
    return "dtype" in tokens(word)
