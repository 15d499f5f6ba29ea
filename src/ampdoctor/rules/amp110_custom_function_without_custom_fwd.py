"""AMP110 custom-function-without-custom-fwd: A custom autograd Function or extension op is not covered by autocast and receives mixed dtypes.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP110`)."""

from __future__ import annotations

import ast
from typing import Iterator

from ampdoctor.core.model import Severity
from ampdoctor.core.registry import code_check
from ampdoctor.lint.python.context import CodeHit, Context, parameter_attributes
from ampdoctor.lint.python.facts import disables_autocast, reenters_autocast
from ampdoctor.lint.python.project import SHIPPED_WORD
from ampdoctor.lint.python.resolve import access_path, method, self_attribute, tokens
from ampdoctor.lint.python.source import parameters


def _decorated(fn: ast.FunctionDef, ctx: Context, wanted: str) -> bool:
    for dec in fn.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        name = ctx.qualname(target) or (target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", ""))
        if name.rsplit(".", 1)[-1] == wanted:
            return True
    return False


def _disables_autocast(fn: ast.FunctionDef, ctx: Context) -> bool:
    return any(isinstance(node, ast.Call) and disables_autocast(node, ctx.src) for node in ast.walk(fn))


def _returns_its_input(fn: ast.FunctionDef) -> bool:
    """Every `return` of the forward hands back one of its arguments untouched (``return x``, x never rebound): an
    identity whose backward alone does the work (a gradient hook, a loss added through backward). No op of its
    output runs in the forward for autocast to cast, and its backward sees the gradient in the output's dtype."""
    params = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args)[1:]}  # not `ctx`
    rebound = {t.id for node in ast.walk(fn) if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign))
               for t in (node.targets if isinstance(node, ast.Assign) else [node.target]) if isinstance(t, ast.Name)}
    returns = [node for node in ast.walk(fn) if isinstance(node, ast.Return)]
    return bool(returns) and all(isinstance(r.value, ast.Name) and r.value.id in params - rebound for r in returns)


# Ops that need their tensor operands in one dtype (a matmul or convolution of bf16 by fp32 raises; an index or
# scatter copy demands its source's dtype), where elementwise ops promote. Autocast casts them inside a Function's
# forward as anywhere else, but not in its backward, which the engine runs with autocast off.
_UNIFORM_DTYPE_OPS = frozenset({
    "matmul", "mm", "bmm", "baddbmm", "addmm", "addbmm", "addmv", "mv", "dot", "linear", "bilinear", "einsum", "tensordot",
    "chain_matmul", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "scaled_dot_product_attention", "index_put", "index_put_", "index_copy", "index_copy_", "scatter", "scatter_",
    "scatter_add", "scatter_add_", "masked_scatter", "masked_scatter_"})
# What a Function's methods may call without leaving torch's own promoting ops: the autograd context's bookkeeping,
# Python builtins, pure-Python math, and in-place methods that take no second tensor.
_CTX_BOOKKEEPING = frozenset({"save_for_backward", "mark_dirty", "mark_non_differentiable", "set_materialize_grads"})
_BUILTINS = frozenset({"len", "range", "isinstance", "min", "max", "float", "int", "bool", "tuple", "list", "dict", "set",
                       "zip", "enumerate", "any", "all", "abs", "getattr", "hasattr", "setattr", "super", "print", "round",
                       "sorted", "reversed", "type", "str"})
_OWN_INPLACE = frozenset({"requires_grad_", "detach_", "zero_", "fill_", "clamp_", "clamp_min_", "clamp_max_", "uniform_",
                          "normal_", "bernoulli_", "resize_", "unsqueeze_", "squeeze_", "t_", "transpose_"})
_PURE_MODULES = ("torch.", "math.", "operator.", "functools.", "itertools.", "numbers.", "typing.")
# In-place elementwise arithmetic casts its result into the receiver's dtype, which between floating dtypes always
# succeeds (`bf16.add_(fp32)`, `fp32.copy_(fp16)`): mixed half and fp32 operands cannot make it fail.
_CASTING_INPLACE = frozenset({"add_", "sub_", "mul_", "div_", "true_divide_", "copy_", "addcmul_", "addcdiv_", "lerp_",
                              "pow_", "masked_fill_"})


def _dtype_sensitive_op(forward: ast.FunctionDef, backward: ast.FunctionDef | None, ctx: Context) -> str | None:
    """The first call in the Function's forward or backward that does not promote mixed dtypes: a matmul-like or
    index-copying op, an in-place op with a tensor operand, a kernel launch (``kernel[grid](...)``), a function of an
    imported module outside torch (an extension: ``_ext.roi_align_forward``), or code the Function is handed or
    defines elsewhere (``ctx.run_function(*args)``, a helper, a method of a module-level object), whose ops are
    unknown here; None when every op is torch's own elementwise kind, which promotes mixed inputs (and the engine
    casts each returned gradient to its input's dtype), or gets its tensors in one dtype by the Function's own casts.
    A backward whose forward aligns its kernels' operands may take, uncast, the tensors the forward gave or got from
    them (`_kernel_consistent`): they and the output's gradient have the dtype the forward's kernels ran in."""
    found = _first_unaligned(forward, ctx, frozenset())
    if found is not None or backward is None:
        return found
    return _first_unaligned(backward, ctx, _kernel_consistent(forward, backward, ctx))


def _first_unaligned(fn: ast.FunctionDef, ctx: Context, consistent: frozenset[str]) -> str | None:
    params = [name for name, _ in _named_parameters(fn)]
    local = _local_names(fn)
    casts, dtypes = _casts_in(fn)
    # `ctx` holds the Function's non-tensor state (sizes, eps): tensors go through save_for_backward
    own = _Operands(casts, dtypes, consistent, params[0] if params else "ctx", _scalars(fn))
    for node in ast.walk(fn):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult) and not own.aligned([node.left, node.right]):
            return "@"
        if isinstance(node, ast.Call) and _call_needs_uniform_dtypes(node, ctx, local) \
                and not own.aligned(node.args, single=_own_code(node, local, params)):
            return ast.unparse(node.func)[:40]
    return None


def _named_parameters(fn: ast.FunctionDef) -> list[tuple[str, ast.expr | None]]:
    """Each named parameter (not ``*args``/``**kwargs``) with its default."""
    return [(a.arg, d) for a, d in parameters(fn.args) if a is not fn.args.vararg and a is not fn.args.kwarg]


def _local_names(fn: ast.FunctionDef) -> set[str]:
    """The function's own names (its tensors); any other name a method is called on is the module's: an import or a
    global object, such as an extension module."""
    params = {name for name, _ in _named_parameters(fn)}
    return params | {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


# Calls that return a Python number (sizes, counts, grid dimensions): builtins called by name (a tensor's `.float()`
# or `.max()` is a tensor), a tensor's size queries, and the number helpers of `math` and `triton`.
_NUMBER_BUILTINS = frozenset({"int", "float", "bool", "len", "round", "min", "max", "abs"})
_SIZE_METHODS = frozenset({"numel", "size", "dim", "element_size", "stride", "nelement"})
_NUMBER_MODULES = frozenset({"math", "triton"})


def _scalars(fn: ast.FunctionDef) -> set[str]:
    """Names that hold no tensor: parameters whose default is a constant (flags, sizes), and names every binding of
    which is a constant, a number-returning call (``int(B)``, ``triton.cdiv(H, BH)``, ``x.size(0)``), a size read
    (``B, C, H, W = x.shape``) or arithmetic of those."""
    # (a None default is an optional tensor's as often as a flag's)
    out = {name for name, default in _named_parameters(fn) if _flag(default)}
    bound: dict[str, list[ast.expr]] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        bound.setdefault(name.id, []).append(node.value)
    # what the autograd context holds besides saved tensors is the Function's non-tensor state (`ctx.scans`)
    positional = [*fn.args.posonlyargs, *fn.args.args]
    context = {positional[0].arg} if positional else set()
    for _ in range(2):  # arithmetic of sizes bound earlier
        out |= {n for n, values in bound.items()
                if all(_number(v, out) or _context_state(v, context) for v in values)}
    return out


def _flag(default: ast.expr | None) -> bool:
    return isinstance(default, ast.Constant) and default.value is not None


def _context_state(expr: ast.expr, context: set[str]) -> bool:
    """``ctx.scans``: an attribute of the autograd context other than its saved tensors."""
    return isinstance(expr, ast.Attribute) and access_path(expr)[:1] == tuple(context) \
        and expr.attr not in ("saved_tensors", "saved_variables")


def _number(expr: ast.expr, scalars: set[str]) -> bool:
    if isinstance(expr, ast.Constant):
        return True
    if isinstance(expr, ast.Name):
        return expr.id in scalars
    if isinstance(expr, ast.Attribute):
        return expr.attr == "shape"
    if isinstance(expr, ast.Subscript):
        return isinstance(expr.value, ast.Attribute) and expr.value.attr == "shape"
    if isinstance(expr, ast.Call):
        func = expr.func
        if isinstance(func, ast.Name):
            return func.id in _NUMBER_BUILTINS
        return isinstance(func, ast.Attribute) and (func.attr in _SIZE_METHODS or next(iter(access_path(func)), None) in _NUMBER_MODULES)
    if isinstance(expr, (ast.BinOp, ast.UnaryOp)):
        parts = [expr.left, expr.right] if isinstance(expr, ast.BinOp) else [expr.operand]
        return all(_number(p, scalars) for p in parts)
    if isinstance(expr, (ast.Tuple, ast.List)):
        return all(_number(e, scalars) for e in expr.elts)
    return False


def _casts_in(fn: ast.FunctionDef) -> tuple[dict[str, set[str]], dict[str, str]]:
    """A name the method binds -> the names whose dtype some binding of it is cast to (``w = weight.to(x.dtype)``);
    and a name bound to a tensor's dtype -> that tensor (``d = x.dtype``)."""
    casts: dict[str, set[str]] = {}
    dtypes: dict[str, str] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value
            if isinstance(value, ast.Attribute) and value.attr == "dtype" and isinstance(value.value, ast.Name):
                dtypes[node.targets[0].id] = value.value.id
            casts.setdefault(node.targets[0].id, set()).update(_cast_to(value, dtypes) | _same_dtype_as(value))
    return casts, dtypes


class _Operands:
    """What one method knows of its operands' dtypes: its casts, its dtype names, the tensors whose dtype its
    kernels already agree on (`consistent`) and the autograd context's name."""

    def __init__(self, casts: dict[str, set[str]], dtypes: dict[str, str], consistent: frozenset[str], ctx_name: str,
                 scalars: set[str]):
        self.casts, self.dtypes, self.consistent, self.ctx_name = casts, dtypes, consistent, ctx_name
        self.scalars = scalars

    def aligned(self, operands: list[ast.expr], single: bool = False) -> bool:
        """The method casts one tensor operand of the op to another's dtype itself (``w = weight.to(x.dtype)``
        before ``torch.mm(x, w.t())``, or ``.type_as(x)`` in place), or every operand to one tensor's dtype, or to
        the dtype of tensors that agree already: the op gets one dtype whatever reaches the Function. `single`: an
        extension's function given one tensor gets one dtype."""
        named = [(r, self.casts.get(r, set()) | _cast_to(op, self.dtypes)) for op in operands for r in access_path(op)[:1]
                 if r != self.ctx_name and r not in self.scalars]
        roots = {r for r, _ in named}
        if self._one_dtype(operands, named, single):
            return True
        if len(named) < 2 or len(roots) < 2:
            return False
        # every operand cast to the dtype of one same tensor, or every other operand cast to one operand's dtype
        return bool(set.intersection(*(to for _, to in named))) or any(all(r == a or a in to for r, to in named) for a in roots)

    def _one_dtype(self, operands: list[ast.expr], named: list[tuple[str, set[str]]], single: bool) -> bool:
        """Sizes and flags only (`triton.cdiv(H, BLOCK)`); one tensor for the Function's own code; or tensors whose
        dtype the forward's kernels already agree on, and casts to theirs."""
        if operands and not named and all(self._no_tensor(op) for op in operands):
            return True
        if single and len({r for r, _ in named}) == 1:
            return True
        return bool(self.consistent and named and all(r in self.consistent or to & self.consistent for r, to in named))

    def _no_tensor(self, operand: ast.expr) -> bool:
        return isinstance(operand, ast.Constant) or _number(operand, self.scalars) \
            or access_path(operand)[:1] == (self.ctx_name,)


def _own_code(call: ast.Call, local: set[str], params: list[str]) -> bool:
    """A kernel launch, a function of a module (an extension: ``_ext.layer_norm_forward(...)``) or of this one
    (``_fn = scan_fwd``): code of the Function's own, not code its caller hands it (``run_function``,
    ``ctx.run_function``), whose ops could mix what one tensor becomes with others."""
    func = call.func
    if isinstance(func, ast.Subscript):
        return True
    if isinstance(func, ast.Name):
        return func.id not in params
    return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id not in local


def _kernel_consistent(forward: ast.FunctionDef, backward: ast.FunctionDef, ctx: Context) -> frozenset[str]:
    """The backward's names whose dtype is the one the forward's kernels ran in: its gradient arguments, and the
    tensors it unpacks from ``ctx.saved_tensors`` that the forward saved as it gave them to a kernel uncast or got
    them from one. Empty where the forward has no kernel or saves nothing positionally."""
    saved, io = _saved_names(forward), _kernel_io(forward, ctx)
    if not saved or not io:
        return frozenset()
    agree = {i for i, name in enumerate(saved) if name in io}
    grads = {a.arg for a in (*backward.args.posonlyargs, *backward.args.args)[1:]}
    return frozenset(grads | {name for i, name in enumerate(_unpacked(backward)) if i in agree and name})


def _kernel_io(forward: ast.FunctionDef, ctx: Context) -> set[str]:
    """The names the forward gives its kernels as they are, and those it binds to what they return."""
    local = _local_names(forward)
    kernels = [n for n in ast.walk(forward) if isinstance(n, ast.Call) and _call_needs_uniform_dtypes(n, ctx, local)]
    given = {a.id for k in kernels for a in k.args if isinstance(a, ast.Name)}
    made = {t.id for node in ast.walk(forward) if isinstance(node, ast.Assign) and node.value in kernels
            for target in node.targets for t in ast.walk(target) if isinstance(t, ast.Name)}
    return given | made


def _unpacked(backward: ast.FunctionDef) -> list[str | None]:
    """What ``a, b, ... = ctx.saved_tensors`` unpacks, by position (None for what is no plain name)."""
    for node in ast.walk(backward):
        if isinstance(node, ast.Assign) and access_path(node.value)[1:] == ("saved_tensors",) \
                and len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple):
            return _by_position(node.targets[0].elts)
    return []


def _saved_names(forward: ast.FunctionDef) -> list[str | None]:
    """What ``ctx.save_for_backward(a, b, ...)`` saves, by position (None for what is no plain name)."""
    for node in ast.walk(forward):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "save_for_backward":
            return _by_position(node.args)
    return []


def _by_position(exprs: list[ast.expr]) -> list[str | None]:
    return [e.id if isinstance(e, ast.Name) else None for e in exprs]


# Methods that change a tensor's layout and nothing else: their result has their receiver's dtype, whatever they take.
_LAYOUT = frozenset({"contiguous", "view", "reshape", "clone", "detach", "transpose", "permute", "flatten", "unsqueeze",
                     "squeeze", "expand", "t", "narrow"})


# Methods that make a new tensor in their receiver's dtype unless given another (`x.new_empty(shape)`).
_NEW_LIKE = frozenset({"new_empty", "new_zeros", "new_ones", "new_full", "new_tensor"})


def _same_dtype_as(expr: ast.AST) -> set[str]:
    """``x.contiguous()``, ``x.view(...)``, ``x.new_empty(shape)``: a tensor in the dtype of the name it is read
    from (either branch of a conditional, where both agree)."""
    if isinstance(expr, ast.IfExp):
        body, orelse = _same_dtype_as(expr.body), _same_dtype_as(expr.orelse)
        return body if body == orelse else set()
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and isinstance(expr.func.value, ast.Name) \
            and (expr.func.attr in _LAYOUT or expr.func.attr in _NEW_LIKE and not any(k.arg == "dtype" for k in expr.keywords)):
        return {expr.func.value.id}
    return set()


def _cast_to(expr: ast.AST, dtypes: dict[str, str] | None = None) -> set[str]:
    """The names whose dtype `expr` casts to: ``.to(x.dtype)``, ``.to(dtype=x.dtype)``, ``.type(x.dtype)``,
    ``.type_as(x)``, and ``.to(d)`` where ``d = x.dtype`` (`dtypes`)."""
    out: set[str] = set()
    for call in (n for n in ast.walk(expr) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)):
        if call.func.attr in ("to", "type"):
            args = [*call.args, *(kw.value for kw in call.keywords if kw.arg == "dtype")]
            out.update(a.value.id for a in args if isinstance(a, ast.Attribute) and a.attr == "dtype" and isinstance(a.value, ast.Name))
            out.update(dtypes[a.id] for a in args if isinstance(a, ast.Name) and dtypes and a.id in dtypes)
        elif call.func.attr == "type_as":
            out.update(a.id for a in call.args if isinstance(a, ast.Name))
    return out


def _call_needs_uniform_dtypes(call: ast.Call, ctx: Context, local: set[str]) -> bool:
    func = call.func
    if isinstance(func, ast.Subscript):
        return True  # a Triton kernel launch
    name = ctx.qualname(func)
    if name is not None:
        return name.rsplit(".", 1)[-1] in _UNIFORM_DTYPE_OPS or not name.startswith(_PURE_MODULES)
    if isinstance(func, ast.Name):
        return func.id not in _BUILTINS
    if not isinstance(func, ast.Attribute):
        return True
    receiver = func.value
    if isinstance(receiver, ast.Name) and receiver.id == "ctx":
        return func.attr not in _CTX_BOOKKEEPING
    if isinstance(receiver, ast.Name) and receiver.id not in local:
        return True  # a module's function: an extension's kernel (relative imports included)
    if func.attr in _UNIFORM_DTYPE_OPS:
        return True
    return func.attr.endswith("_") and not func.attr.endswith("__") and func.attr not in _OWN_INPLACE | _CASTING_INPLACE \
        and bool(call.args)


def _applications(cls: ast.ClassDef, ctx: Context) -> list[ast.AST]:
    """Where this file uses the Function outside its own body: ``Cls.apply(...)``, or a name bound to it
    (``sqrtm = Cls.apply``) and then called."""
    outside = [n for n in ast.walk(ctx.src.tree) if isinstance(n, ast.Name) and n.id == cls.name
               and not any(a is cls for a in ctx.src.ancestors(n))]
    aliases = {t.id for n in outside if isinstance(stmt := ctx.src.parents.get(ctx.src.parents.get(n)), ast.Assign)
               and ctx.src.scope(stmt) is ctx.src.tree for t in stmt.targets if isinstance(t, ast.Name)}
    return outside + [n for n in ast.walk(ctx.src.tree) if isinstance(n, ast.Name) and n.id in aliases
                      and isinstance(n.ctx, ast.Load)]


# A Function an installable package ships runs under its users' autocast, which no word of the package names: its
# project context stands for them (`SHIPPED_WORD`).
@code_check("AMP110", triggers=("Function",), also=(("autocast", "mixed_precision", "precision=", "bf16=", "fp16=", SHIPPED_WORD),),
            project=True)
def custom_function_without_custom_fwd(ctx: Context) -> Iterator[CodeHit]:
    # pytorch #38487: autocast does not reach inside a custom Function, so its kernels see mixed dtypes.
    if ctx.facts.half_autocast is None and ctx.project.autocast is None and not ctx.project.shipped:
        return
    for cls in ctx.src.classes:
        if not any(ctx.qualname(b) == "torch.autograd.Function" for b in cls.bases):
            continue
        # where the file applies the Function, its own autocast counts only if it reaches one of those places
        applied = _applications(cls, ctx)
        where = _autocast_around(ctx, applied)
        if where is None:
            continue
        backward, forward = method(cls, "backward"), method(cls, "forward")
        if backward is not None and reenters_autocast(backward, ctx.src):
            continue  # the backward replays the autocast state by hand (an activation checkpoint): what custom_fwd does
        if forward is None or _decorated(forward, ctx, "custom_fwd") or _disables_autocast(forward, ctx) or _returns_its_input(forward):
            continue
        sensitive = _dtype_sensitive_op(forward, backward, ctx)
        if sensitive is None:
            continue
        mixed = _mixes_dtypes(cls, forward, backward, applied, ctx)
        if not where:
            # Nothing of this project autocasts around it; the package's users may, and what shows two dtypes meeting
            # there (a weight beside the activations autocast makes half) is worth a note, not a guess at their runs.
            if mixed is not None:
                yield forward, (f"`{cls.name}.forward` has no `custom_fwd`, and this package ships it: a user's autocast "
                                f"does not reach inside the Function, where `{sensitive}` needs its tensors in one dtype, "
                                f"and {mixed}; its backward runs outside autocast (nothing in this project runs it under "
                                "autocast: a note)"), Severity.INFO
            continue
        head = (f"`{cls.name}.forward` has no `custom_fwd` and {where}: `{sensitive}` in the Function needs its tensors "
                "in one dtype, but what reaches it keeps whatever dtypes the ops before it left")
        if mixed is not None:
            yield forward, f"{head}, and {mixed}; its backward runs outside autocast", Severity.WARNING
        else:
            # Activations of one autocast region share its dtype: without a tensor from outside it, the mix is possible
            # (an fp32 softmax beside bf16 values), not shown. Judged on real code such findings were never true.
            yield forward, (f"{head} (mixed, where those disagree; nothing here shows it handed a weight, data made "
                            "outside the autocast or code to re-run), and its backward runs outside autocast"), Severity.INFO


def _autocast_around(ctx: Context, applied: list[ast.AST]) -> str | None:
    """Where an autocast runs the Function, said for the message: the file's own (where its code reaches a place the
    file applies it), or the project's; "" for a Function an installable package ships, which only its users' runs
    may autocast around; None where nothing does."""
    # a Function applied only elsewhere may be applied under the file's autocast (through an import) or not
    local = ctx.facts.half_autocast_reaching(applied) if applied else ctx.facts.half_autocast
    if local is not None:
        return f"this file runs it under autocast (line {local.lineno})"
    if ctx.project.autocast is not None:
        return f"the project runs it under {ctx.project.autocast.describe()}"
    return "" if ctx.project.shipped else None


# Names that say a tensor is a layer's weight: a parameter, fp32 under autocast beside the half activations.
_WEIGHT_WORDS = frozenset({"weight", "weights", "bias", "param", "params", "parameter", "parameters"})


def _mixes_dtypes(cls: ast.ClassDef, forward: ast.FunctionDef, backward: ast.FunctionDef | None, applied: list[ast.AST],
                  ctx: Context) -> str | None:
    """What shows the Function meeting two dtypes under autocast, said for the message; None when nothing does.
    Autocast makes activations half but leaves parameters and data made outside it as they are: a weight among the
    forward's tensors (by its name, ``def forward(ctx, x, weight)``, or as an application hands it: ``self.weight``,
    an ``nn.Parameter`` of the module, ``layer.bias``), a tensor an application inside the autocast block takes from
    outside it beside one computed inside, or code the Function is handed and re-runs (a checkpoint's
    ``run_function``), whose layers' fp32 weights meet the half tensors it saved."""
    params = [name for name, _ in _named_parameters(forward)]
    handed = _handed_code(forward, backward, params)
    if handed is not None:
        return f"it re-runs code it is handed (`{handed}`)"
    scalars = _scalars(forward)
    weights = [n for n in params[1:] if n not in scalars and (n == "w" or tokens(n) & _WEIGHT_WORDS)]
    if weights:
        return f"its forward takes `{weights[0]}`, by its name a layer's weight, which autocast leaves in its own dtype"
    for call in _application_calls(applied, ctx):
        given = [*call.args, *(k.value for k in call.keywords)]
        weight = next((a for a in given if _weight_like(a, ctx)), None)
        if weight is not None:
            return f"`{ast.unparse(call)[:60]}` (line {call.lineno}) hands it the weight `{ast.unparse(weight)[:30]}`"
        outside = _from_outside_autocast(call, given, ctx)
        if outside is not None:
            return (f"`{ast.unparse(call)[:60]}` (line {call.lineno}) hands it `{outside}`, made outside the autocast, beside "
                    "tensors computed under it")
    return None


def _handed_code(forward: ast.FunctionDef, backward: ast.FunctionDef | None, params: list[str]) -> str | None:
    """A call of code the forward is handed: a parameter called (``run_function(*args)``) or kept on the autograd
    context and called there (``ctx.run_function(*inputs)``)."""
    handed = set(params[1:])
    kept = {t.attr for node in ast.walk(forward) if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name)
            and node.value.id in handed for t in node.targets if isinstance(t, ast.Attribute)}
    for fn in (forward, backward):
        for node in ast.walk(fn) if fn is not None else ():
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Name) and func.id in handed or isinstance(func, ast.Attribute) and func.attr in kept:
                return ast.unparse(func)
    return None


def _application_calls(applied: list[ast.AST], ctx: Context) -> list[ast.Call]:
    """The calls that apply the Function, from `_applications`' names: ``Cls.apply(...)`` or ``alias(...)``."""
    calls = []
    for name in applied:
        parent = ctx.src.parents.get(name)
        if isinstance(parent, ast.Attribute) and parent.attr == "apply":
            name, parent = parent, ctx.src.parents.get(parent)
        if isinstance(parent, ast.Call) and parent.func is name:
            calls.append(parent)
    return calls


def _weight_like(expr: ast.AST, ctx: Context) -> bool:
    """``self.weight``, ``layer.bias``, ``lin_weight``, an ``nn.Parameter`` attribute of the module, through layout
    methods (``self.weight.t()``); a cast (``w.to(x.dtype)``) is not: it is the Function's caller aligning it."""
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in _LAYOUT:
        expr = expr.func.value
    if isinstance(expr, ast.Subscript):
        expr = expr.value
    if isinstance(expr, ast.Name):
        return expr.id == "w" or bool(tokens(expr.id) & _WEIGHT_WORDS)
    if not isinstance(expr, ast.Attribute):
        return False
    if tokens(expr.attr) & _WEIGHT_WORDS:
        return True
    cls = ctx.src.enclosing_class(expr)
    return self_attribute(expr) is not None and cls is not None and expr.attr in parameter_attributes(ctx, cls)


def _bound_by_calls(block: ast.AST) -> set[str]:
    """The names a block binds to what a call returns (``feats = backbone(images)``, ``q, k = proj(x).chunk(2)``)."""
    return {t.id for node in ast.walk(block) if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
            for target in node.targets for t in ast.walk(target) if isinstance(t, ast.Name)}


def _from_outside_autocast(call: ast.Call, given: list[ast.expr], ctx: Context) -> str | None:
    """An application inside a ``with`` autocast block of its function that takes a name bound before the block (a
    parameter of the function: a batch's boxes, targets) beside one the block computes by a call: the first stays in
    the dtype it came with, the second is half."""
    block = next((a for a in ctx.src.ancestors(call) if isinstance(a, ast.With)
                  and any("autocast" in ast.unparse(item.context_expr) for item in a.items)), None)
    scope = ctx.src.scope(call)
    if block is None or not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    inside = _bound_by_calls(block)
    names = [a for a in given if isinstance(a, ast.Name)]
    outside = [a.id for a in names if ctx.src.is_parameter(a) and a.id not in inside]
    return outside[0] if outside and any(a.id in inside for a in names) else None

