"""Where a tensor surely became fp32 (`fp32_made`), and whether the code around it runs under autocast or in a model
with half weights: what AMP131 asks of a layer's input and AMP122 of an attention mask, read once here."""

from __future__ import annotations

import ast

from ampdoctor.lint.python.context import Context, in_half_module
from ampdoctor.lint.python.dataflow import FP32, PRESERVING, describe, torch_factory
from ampdoctor.lint.python.facts import AUTOCASTING_FRAMEWORKS, MIXED_PRECISION_KEYWORDS, disables_autocast
from ampdoctor.lint.python.resolve import keyword, last_identifier, method, self_attribute, tokens

# Factories whose result, without `dtype=`, is in the default dtype (fp32) whatever their arguments; `arange` and
# `tensor` are fp32 only from a float argument (`torch.arange(n)` is int64), the `*_like` ones follow their input.
_DEFAULT_FLOAT = frozenset({"zeros", "ones", "empty", "rand", "randn", "linspace", "logspace", "eye"})


_FROM_FLOATS = frozenset({"arange", "tensor", "as_tensor", "range"})


# Views and shape changes an expression reaches its tensor through (`self.kernel[None].expand(c, 1, -1, -1)`).
VIEWS = PRESERVING | {"expand", "expand_as", "float"}


def under_autocast(ctx: Context, node: ast.AST) -> bool:
    """`node` runs in a ``with`` block that turns autocast on (``torch.autocast(...)``, ``accelerator.autocast()``,
    ``with autocast_ctx:``), in its own function: the name the item ends in says autocast or amp."""
    def named(expr: ast.expr) -> bool:
        return bool(tokens(last_identifier(expr) or "") & {"autocast", "amp"}) \
            and not (isinstance(expr, ast.Call) and disables_autocast(expr, ctx.src))
    return in_with_block(ctx, node, named)


def in_with_block(ctx: Context, node: ast.AST, entered) -> bool:
    """`node` runs in the body of a ``with`` block of its own function one of whose items `entered` accepts."""
    for parent, child in ctx.src.steps(node):
        if isinstance(parent, (ast.With, ast.AsyncWith)) and child in parent.body and any(entered(i.context_expr) for i in parent.items):
            return True
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return False
    return False


def autocast_elsewhere(ctx: Context) -> bool:
    """The file or its project may run the code under half autocast (or a framework's mixed precision, which also
    wraps the forward of a model `accelerator.prepare` hands back), in some run: the model may be cast to half in
    exactly the runs that autocast it."""
    return bool(ctx.facts.mixed_precision) or ctx.project.autocast is not None or _precision_from_outside(ctx)


def _precision_from_outside(ctx: Context) -> bool:
    """A framework that autocasts (`AUTOCASTING_FRAMEWORKS`) is given its precision by a value the file does not
    show (``Accelerator(mixed_precision=args.mixed_precision)`` with the option declared in another module): a run may
    turn it on, and a model cast to the run's weight dtype is half exactly then."""
    text = ctx.src.text
    # every such keyword holds "precision" or "_dtype": without them no call can pass one (a walk of every call saved)
    if "precision" not in text and "_dtype" not in text:
        return False
    for call in ctx.src.calls:
        # the keywords first: most calls pass none of them, and naming the callee costs more
        if any(kw.arg in MIXED_PRECISION_KEYWORDS and not isinstance(kw.value, ast.Constant) for kw in call.keywords) \
                and (ctx.qualname(call.func) or "").partition(".")[0] in AUTOCASTING_FRAMEWORKS:
            return True
    return False


def fp32_made(ctx: Context, expr: ast.AST, scope: ast.AST, depth: int = 0) -> ast.AST | None:
    """Where `expr` surely became an fp32 tensor: an explicit cast (``.float()``, ``.to(torch.float32)``), a factory
    given ``dtype=torch.float32``, or one that makes its tensor in the default dtype (``torch.randn(...)``,
    ``torch.zeros(...)`` without `dtype`, ``torch.tensor([0.5])``); through views, moves to a device and the last
    binding of a name. None where the dtype may be anything else (a cast to another tensor's dtype, an argument)."""
    if depth % _HOP > 24:
        return None
    if isinstance(expr, ast.Name):
        value = last_value(ctx, expr, scope)
        return fp32_made(ctx, value, scope, depth + 1) if value is not None and ctx.src.scope(value) is scope else None
    if isinstance(expr, ast.BinOp):
        return _fp32_arithmetic(ctx, expr, scope, depth)
    if isinstance(expr, ast.Subscript):
        return fp32_made(ctx, expr.value, scope, depth + 1)
    if not isinstance(expr, ast.Call):
        return None
    dtypes = ctx.flow.cast_dtype(expr, scope)
    if dtypes:
        return expr if dtypes == FP32 else None
    func = expr.func
    name = ctx.qualname(func)
    if name is not None and name.startswith("torch."):
        return _fp32_torch_call(ctx, expr, name, scope, depth)
    if isinstance(func, ast.Attribute) and ctx.qualname(func) is None and (func.attr in VIEWS and func.attr != "float" or device_move(expr)):
        return fp32_made(ctx, func.value, scope, depth + 1)
    callee = local_callee(ctx, expr)
    return _fp32_returned(ctx, callee, depth) if callee is not None else None


def local_callee(ctx: Context, call: ast.Call, modules: bool = True) -> ast.FunctionDef | None:
    """The function of this file a call runs: ``embed(t)`` with ``def embed`` at the file's top level (and nothing
    else binding the name), or ``self.embed(t)`` with ``def embed`` in the calling class, or, with `modules`, the
    ``forward`` of a submodule the class builds from a class of this file (`_submodule_forward`). None for anything
    imported, passed in or overridable from outside the file (a subclass's override is not this file's to know)."""
    func = call.func
    if isinstance(func, ast.Name):
        if ctx.qualname(func) is not None:
            return None  # imported
        found = _defined_once(ctx, func.id)
        return found if isinstance(found, ast.FunctionDef) else None
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
        cls = ctx.src.enclosing_class(call)
        if cls is None:
            return None
        found = method(cls, func.attr) or (_submodule_forward(ctx, cls, func.attr) if modules else None)
        return found if isinstance(found, ast.FunctionDef) and not found.decorator_list else None
    return None


def _submodule_forward(ctx: Context, cls: ast.ClassDef, attr: str) -> ast.FunctionDef | None:
    """``self.embed(t)`` where the class binds ``self.embed = Embed(...)`` once, and ``Embed`` is a class of this file:
    its ``forward`` (the module's call runs it)."""
    built = ctx.src.built_in_class(cls).get(attr, [])
    if len(built) != 1 or not isinstance(built[0].func, ast.Name) or ctx.qualname(built[0].func) is not None:
        return None
    cls = _defined_once(ctx, built[0].func.id)
    return method(cls, "forward") if isinstance(cls, ast.ClassDef) else None


def _defined_once(ctx: Context, name: str) -> ast.stmt | None:
    """The one statement of the module's body that binds `name`; None where none does or several do (which of them
    runs is not this file's to say)."""
    defs = ctx.src.top_level.get(name, [])
    return defs[0] if len(defs) == 1 else None


# `fp32_made`'s depth counts the steps inside one function (below _HOP) and the functions entered (multiples of it):
# each callee gets the whole step budget, and at most _CALLEES of them are followed.
_HOP, _CALLEES = 100, 3


def _fp32_returned(ctx: Context, fn: ast.FunctionDef, depth: int) -> ast.AST | None:
    """Where the function's result surely became fp32: every ``return`` of its own body returns a tensor
    `fp32_made` knows as fp32 (the first one's origin is the evidence); None where any return may be something else."""
    entered = depth // _HOP + 1
    if entered > _CALLEES:
        return None
    returns = ctx.src.own_returns(fn)
    if not returns or any(r.value is None for r in returns):
        return None
    made = [fp32_made(ctx, r.value, fn, entered * _HOP) for r in returns]
    return made[0] if all(m is not None for m in made) else None


def _fp32_torch_call(ctx: Context, expr: ast.Call, name: str, scope: ast.AST, depth: int) -> ast.AST | None:
    """`fp32_made` of a call of a torch function (`name`, qualified)."""
    if name == "torch.from_numpy":
        return expr  # NumPy's dtype: fp64 or fp32 for float arrays, whatever the model is cast to
    if name in _FP32_CONSTRUCTORS:
        return expr  # the legacy constructors make fp32 whatever they are given
    if name in _FP32_IN_FP32_OUT or name in _JOINS:
        return _fp32_parts(ctx, expr, name, scope, depth)
    made = torch_factory(name)
    return expr if made is not None and _default_float(expr, made) else None


_FP32_CONSTRUCTORS = frozenset({"torch.Tensor", "torch.FloatTensor", "torch.cuda.FloatTensor"})


# torch functions whose result has the dtype of their one tensor argument, and those that join a list of tensors
# (of one dtype: their result keeps it).
_FP32_IN_FP32_OUT = frozenset({f"torch.{n}" for n in ("sin", "cos", "exp", "sqrt", "rsqrt", "log", "tanh", "sigmoid", "outer")}
                              | {"torch.nn.functional.pad"})


_JOINS = frozenset({"torch.cat", "torch.stack", "torch.concat", "torch.concatenate"})


def _fp32_arithmetic(ctx: Context, expr: ast.BinOp, scope: ast.AST, depth: int) -> ast.AST | None:
    """Arithmetic that leaves an fp32 tensor: with a Python number (`_scaled_by_number`), or between two tensors that
    are both fp32 (``t[:, None].float() * freqs[None]``). One fp32 operand alone says nothing: a 0-dim fp32 tensor
    beside a half one leaves it half."""
    tensor = _scaled_by_number(ctx, expr, scope)
    if tensor is not None:
        return fp32_made(ctx, tensor, scope, depth + 1)
    if isinstance(expr.op, ast.MatMult):
        return None
    left = fp32_made(ctx, expr.left, scope, depth + 1)
    return left if left is not None and fp32_made(ctx, expr.right, scope, depth + 1) is not None else None


def _fp32_parts(ctx: Context, call: ast.Call, name: str, scope: ast.AST, depth: int) -> ast.AST | None:
    """``torch.exp(x)``, ``torch.outer(a, b)``, ``torch.cat([a, b], -1)`` of tensors that are all fp32."""
    parts = call.args[0].elts if name in _JOINS and call.args and isinstance(call.args[0], (ast.List, ast.Tuple)) \
        else call.args[:2] if name == "torch.outer" else call.args[:1]
    if not parts or keyword(call, "dtype") is not None or keyword(call, "out") is not None:
        return None
    found = [fp32_made(ctx, p, scope, depth + 1) for p in parts]
    return found[0] if all(f is not None for f in found) else None


def _scaled_by_number(ctx: Context, expr: ast.BinOp, scope: ast.AST) -> ast.AST | None:
    """The tensor operand of arithmetic with a Python number (``img.float() / 255.0``, ``x * 2 - 1``,
    ``-math.log(base) * freqs / half``), which keeps the tensor's dtype; None for arithmetic between two tensors (or a
    matrix product)."""
    if isinstance(expr.op, ast.MatMult):
        return None
    for tensor, number in ((expr.left, expr.right), (expr.right, expr.left)):
        if _number(ctx, number, scope):
            return tensor
    return None


def _number(ctx: Context, expr: ast.AST, scope: ast.AST, depth: int = 0) -> bool:
    """A Python number: an int or float literal (``255.0``, ``-1``), a `math` function of one, arithmetic of them, or
    a local name last bound to one (``half = self.dim // 2``, with `//` and `int(...)` making ints of anything)."""
    if depth > 4:
        return False
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
        expr = expr.operand
    if isinstance(expr, ast.Constant):
        return isinstance(expr.value, (int, float)) and not isinstance(expr.value, bool)
    if isinstance(expr, ast.BinOp):
        return isinstance(expr.op, ast.FloorDiv) and not _tensor_side(ctx, expr) \
            or _number(ctx, expr.left, scope, depth + 1) and _number(ctx, expr.right, scope, depth + 1)
    if isinstance(expr, ast.Call):
        name = ctx.qualname(expr.func) or ""
        return name.startswith("math.") or isinstance(expr.func, ast.Name) and expr.func.id in ("int", "float", "len")
    if isinstance(expr, ast.Name):
        if _annotated_number(ctx, expr, scope):
            return True
        value = last_value(ctx, expr, scope)
        return value is not None and ctx.src.scope(value) is scope and _number(ctx, value, scope, depth + 1)
    return False


def _annotated_number(ctx: Context, name: ast.Name, scope: ast.AST) -> bool:
    """A parameter of the function the name is read in, annotated a Python number (``scale: float = 1``) and not
    rebound in its body: what the author says a caller passes."""
    if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    args = scope.args
    arg = next((a for a in (*args.posonlyargs, *args.args, *args.kwonlyargs) if a.arg == name.id), None)
    if arg is None or not (isinstance(arg.annotation, ast.Name) and arg.annotation.id in ("float", "int")):
        return False
    return all(line == scope.lineno for line, _ in ctx.src.bindings(name, scope))


def _tensor_side(ctx: Context, expr: ast.BinOp) -> bool:
    """An operand of `expr` that a torch call or a tensor method makes."""
    return any(isinstance(n, ast.Call) and ((ctx.qualname(n.func) or "").startswith("torch.") or isinstance(n.func, ast.Attribute)
                                            and ctx.qualname(n.func) is None and n.func.attr in VIEWS)
               for n in ast.walk(expr))


def made_in(made: ast.AST) -> str:
    """How the message says what `fp32_made` found."""
    text = ast.unparse(made)
    if ".register_buffer(" in text:
        return f"a buffer built fp32 and kept out of the checkpoint (`{text[:50]}`)"
    if isinstance(made, ast.Call) and last_identifier(made.func) == "from_numpy":
        return f"made in NumPy's dtype (fp32 or fp64) by `{text[:50]}`"
    return f"made fp32 by `{text[:50]}`"


def last_value(ctx: Context, name: ast.Name, scope: ast.AST) -> ast.AST | None:
    """What a name was last bound to before it is read, in its scope."""
    before = [b for b in ctx.src.bindings(name, scope) if b[0] < name.lineno]
    return before[-1][1] if before else None


def _default_float(call: ast.Call, factory: str) -> bool:
    """A torch factory call that makes its tensor in the default dtype: no `dtype=`, and a factory that makes floats
    whatever its arguments, or one given a float (``torch.tensor([0.5])``, ``torch.arange(0, 1, 0.1)``)."""
    if keyword(call, "dtype") is not None:
        return False
    floats = any(isinstance(a, ast.Constant) and isinstance(a.value, float) for a in call.args)
    return factory in _DEFAULT_FLOAT or factory in _FROM_FLOATS and floats


def device_move(call: ast.Call) -> bool:
    """``x.to(device)``, ``x.to("cuda")``, ``x.to(device=dev, non_blocking=True)``: a move that keeps the dtype."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr == "to") or keyword(call, "dtype") is not None or len(call.args) > 1:
        return False
    if not call.args:
        return keyword(call, "device") is not None
    first = call.args[0]
    if isinstance(first, ast.Constant):
        return isinstance(first.value, str) and first.value.split(":")[0] in ("cuda", "cpu", "mps", "xpu", "npu")
    return bool(tokens(last_identifier(first) or "") & {"device", "dev", "cuda", "gpu", "rank"})


def follows_weights(expr: ast.AST) -> bool:
    """A dtype read off the module's weights: ``self.dtype``, ``self.proj.weight.dtype``, ``weight.dtype``,
    ``next(self.parameters()).dtype``."""
    if not (isinstance(expr, ast.Attribute) and expr.attr == "dtype"):
        return False
    owner = expr.value
    if isinstance(owner, ast.Name):
        return owner.id in ("self", "weight")
    if isinstance(owner, ast.Attribute):
        return owner.attr in ("weight", "bias") or self_attribute(owner) is not None and "weight" in tokens(owner.attr)
    return isinstance(owner, ast.Call) and "parameters" in ast.unparse(owner)


def weight_dtype_cast(ctx: Context, cls: ast.ClassDef) -> ast.Call | None:
    """A cast in the class to the dtype of the module's weights (``x.to(self.dtype)``, ``.to(dtype=self.conv.weight.dtype)``,
    ``.type(self.dtype)``): its author expects the weights in another dtype than what comes in, a half one."""
    for node in ast.walk(cls):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("to", "type"):
            given = keyword(node, "dtype") or (node.args[0] if node.args else None)
            if given is not None and follows_weights(given):
                return node
    return None


def half_weights(ctx: Context, cls: ast.ClassDef) -> tuple[str, int] | None:
    """Why the layers of this class hold half weights, as (what, line): the file casts its own model to half, the
    project runs this file's model so, or the class casts other inputs to its weights' dtype."""
    local = in_half_module(ctx, cls.body[0]) if cls.body else None
    if local is not None:
        return f"this file casts its model to {describe(local.dtypes)}", local.node.lineno
    project = ctx.half_model_at(cls)
    if project is not None:
        return f"the project runs this model as {project.describe()}", 0
    cast = weight_dtype_cast(ctx, cls)
    if cast is not None:
        return f"the class casts other inputs to its weights' dtype (`{ast.unparse(cast)[:60]}`, line {cast.lineno})", cast.lineno
    return None


# What `half_weights` needs a file (or its project context, `project.project_words`) to say: a half dtype its model is
# cast to, or a cast to the dtype of the module's weights.
HALF_WEIGHT_WORDS = ("bfloat16", "float16", ".half()", "torch.half", "bf16", "fp16", "self.dtype", "weight.dtype", "bias.dtype",
                      "parameters()).dtype")
