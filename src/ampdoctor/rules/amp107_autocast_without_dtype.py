"""AMP107 autocast-without-dtype: `autocast` is entered without `dtype=`, so CUDA defaults to fp16 whatever the config says.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP107`)."""

from __future__ import annotations

import ast
from typing import Any, Iterator, Mapping

from ampdoctor.core.model import Severity
from ampdoctor.core.registry import code_check, code_fix
from ampdoctor.dtypes import BF16
from ampdoctor.lint.cstedit import asked, dotted, imports_torch, with_keyword
from ampdoctor.lint.python.config_values import key_path
from ampdoctor.lint.python.context import GRAD_SCALERS, CodeHit, Context, bf16_in_function, calls_named
from ampdoctor.lint.python.dataflow import autocast_argument
from ampdoctor.lint.python.facts import AUTOCASTS, disables_autocast
from ampdoctor.lint.python.resolve import has_star_kwargs, tokens


def _always_scaled(ctx: Context) -> ast.Call | None:
    """A GradScaler created unconditionally (no ``enabled=``, in no branch): the script does fp16 AMP on purpose,
    and autocast's fp16 default is what it wants."""
    for call, _ in calls_named(ctx, GRAD_SCALERS):
        gated = any(kw.arg == "enabled" and not (isinstance(kw.value, ast.Constant) and kw.value.value is True) for kw in call.keywords)
        if gated or len(call.args) > 1:
            continue
        if not any(isinstance(a, (ast.If, ast.IfExp)) and not _main_guard(a) for a in ctx.src.ancestors(call)):
            return call
    return None


def _scaled_with(ctx: Context, autocast: ast.Call) -> bool:
    """A GradScaler switched by the same flag as this autocast (``GradScaler(enabled=use_amp)`` beside
    ``autocast("cuda") if use_amp else nullcontext()`` or ``autocast(enabled=use_amp)``): whenever the autocast is
    on, so is loss scaling: fp16 AMP on purpose."""
    gates = {ast.dump(kw.value) for kw in autocast.keywords if kw.arg == "enabled"}
    for parent, child in ctx.src.steps(autocast):
        if isinstance(parent, (ast.If, ast.IfExp)) and child is not parent.test and child in (
                parent.body if isinstance(parent.body, list) else [parent.body]):
            gates.add(ast.dump(parent.test))
    if not gates:
        return False
    return any(ast.dump(kw.value) in gates for call, _ in calls_named(ctx, GRAD_SCALERS) for kw in call.keywords
               if kw.arg == "enabled")


def _main_guard(node: ast.AST) -> bool:
    """``if __name__ == "__main__":`` runs whenever the script does: not a branch of the run's precision."""
    test = getattr(node, "test", None)
    return isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"


def _kwargs_lack_dtype(ctx: Context, call: ast.Call, name: str) -> bool:
    """`autocast(..., **kw)` where `kw` cannot hold a dtype: a dict literal (or `dict(...)`) bound to it without a
    "dtype" key, or another autocast of the same function that passes `dtype=` beside the same `**kw` (a dtype in
    `kw` would make that call a TypeError)."""
    stars = [kw.value for kw in call.keywords if kw.arg is None]
    if any(isinstance(a, ast.Starred) for a in call.args) or len(stars) != 1:
        return False
    star = stars[0]
    if _beside_explicit_dtype(ctx, call, star):
        return True
    if not isinstance(star, ast.Name):
        return False
    bound = [value for _, value in ctx.src.bindings(star, ctx.src.scope(call))]
    return bool(bound) and all(_dict_without_dtype(v) for v in bound)


def _beside_explicit_dtype(ctx: Context, call: ast.Call, star: ast.expr) -> bool:
    fn = ctx.src.enclosing_function(call)
    same = ast.dump(star)
    for other, other_name in calls_named(ctx, AUTOCASTS):
        if other is call or ctx.src.enclosing_function(other) is not fn or autocast_argument(other, other_name, "dtype") is None:
            continue
        if any(kw.arg is None and ast.dump(kw.value) == same for kw in other.keywords):
            return True
    return False


def _dict_without_dtype(value: ast.AST | None) -> bool:
    if isinstance(value, ast.Dict):
        return all(isinstance(k, ast.Constant) and k.value != "dtype" for k in value.keys)
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "dict" and not value.args:
        return all(kw.arg not in (None, "dtype") for kw in value.keywords)
    return False


def _older_torch_fallback(ctx: Context, call: ast.Call) -> bool:
    """The call is one arm of a torch version test whose other arm enters autocast with `dtype=`
    (``if is_torch_greater_or_equal_than_1_10: autocast(dtype=...) else: autocast()``): the dtype-less arm runs only
    on a torch too old to take `dtype=`, where CUDA autocast has no dtype but fp16 to give."""
    for parent, child in ctx.src.steps(call):
        if isinstance(parent, (ast.If, ast.IfExp)) and child is not parent.test and _names_torch_version(parent.test):
            body = parent.body if isinstance(parent.body, list) else [parent.body]
            orelse = parent.orelse if isinstance(parent.orelse, list) else [parent.orelse]
            other = orelse if any(child is n for n in body) else body
            calls = (n for stmt in other for n in ast.walk(stmt) if isinstance(n, ast.Call))
            named = ((c, ctx.qualname(c.func)) for c in calls)
            if any(name in AUTOCASTS and autocast_argument(c, name, "dtype") is not None for c, name in named):
                return True
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return False
    return False


def _names_torch_version(test: ast.expr) -> bool:
    """``torch.__version__ >= "1.10"``, ``version.parse(torch.__version__)``, ``is_torch_greater_or_equal_than_1_10``:
    torch named beside a version (a model's or a config's version chooses something else)."""
    words: set[str] = set()
    for node in ast.walk(test):
        name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
        words |= tokens(name or "")
    return "torch" in words and ("version" in words or any(w.isdigit() for w in words))


def _else_of(ctx: Context, call: ast.Call) -> list[ast.expr]:
    """The tests of the if/elif chain whose final `else` holds the call (none if it sits in no such `else`)."""
    for parent, child in ctx.src.steps(call):
        if isinstance(parent, ast.If) and child in parent.orelse and not (len(parent.orelse) == 1 and isinstance(parent.orelse[0], ast.If)):
            return _chain(ctx, parent)
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return []
    return []


def _chain(ctx: Context, last: ast.If) -> list[ast.expr]:
    """The tests of an if/elif chain, given its last `if`, from it up to the first."""
    arms = _arms(ctx, last)
    return [arm.test for arm in reversed(arms[:arms.index(last) + 1])]


def _arms(ctx: Context, node: ast.If) -> list[ast.If]:
    """Every `if`/`elif` of the chain `node` belongs to, first to last."""
    first = node
    while isinstance(parent := ctx.src.parents.get(first), ast.If) and parent.orelse == [first]:
        first = parent
    arms = [first]
    while len(arms[-1].orelse) == 1 and isinstance(arms[-1].orelse[0], ast.If):
        arms.append(arms[-1].orelse[0])
    return arms


def _conjoined_with_bf16(tests: list[ast.expr]) -> ast.expr | None:
    """A bf16 test joined with `and` to another condition: a bf16 run where that condition fails goes on to the
    `else`. Returns that other condition."""
    for test in tests:
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            bf16 = [v for v in test.values if _says_bf16(v)]
            others = [v for v in test.values if not _says_bf16(v)]
            if bf16 and others:
                return others[0]
    return None


def _says_bf16(test: ast.expr) -> bool:
    """A test that holds for a bf16 run: `precision == "bf16"`, `mp in ("bf16", ...)`, `dtype == torch.bfloat16`."""
    if not isinstance(test, ast.Compare) or not all(isinstance(op, (ast.Eq, ast.In)) for op in test.ops):
        return False
    return any(isinstance(n, ast.Constant) and n.value in ("bf16", "bfloat16") or isinstance(n, ast.Attribute) and n.attr == "bfloat16"
               for side in test.comparators for n in ast.walk(side))


def _bf16_runs_elsewhere(ctx: Context, call: ast.Call, tests: list[ast.expr]) -> bool:
    """A bf16 run takes another branch: an earlier test of the chain whose `else` holds the call says bf16, another
    arm of the call's own chain tests the precision for a bf16 value (`_bf16_takes_another_arm`), or the file splits
    its runs by a test: each bf16 of the file sits on the other side of one from the call or from another autocast
    without `dtype=` (``if scaler is None: x.bfloat16()`` ... ``if scaler is None: ... else: autocast()``), one of
    them from the call, and none of them the dtype of an autocast. The file's bf16 is the path without autocast
    (a cast by hand, DeepSpeed); its autocasts are the fp16 path. An autocast given bf16 on the other side is the
    same mechanism with the dtype forgotten on this one, whatever the test (a model version) chooses by."""
    if any(_says_bf16(t) for t in tests) or _bf16_takes_another_arm(ctx, call):
        return True
    places = list(ctx.facts.bf16_places())
    if not any(ctx.src.exclusive(e, call) for e in places):
        return False
    dtypes = [(c, autocast_argument(c, name, "dtype")) for c, name in calls_named(ctx, AUTOCASTS)]
    given = {id(n) for _, d in dtypes if d is not None for n in ast.walk(d)}
    dtypeless = [c for c, d in dtypes if d is None]
    return all(id(e) not in given and any(ctx.src.exclusive(e, c) for c in dtypeless) for e in places)


def _bf16_takes_another_arm(ctx: Context, call: ast.Call) -> bool:
    """The call is the body of an if/elif arm that compares a value to constants none of which names bf16
    (``if precision == "amp":``), and another arm of the same chain compares that value to one that does
    (``elif precision in ("amp_bf16", "amp_bfloat16"):``): equal to one constant, the value is not the other, so a
    bf16 run takes that arm and never this one."""
    arm = next((p for p, c in ctx.src.steps(call) if isinstance(p, ast.If) and c in p.body), None)
    mine = _compared(arm.test) if arm is not None and ctx.src.enclosing_function(arm) is ctx.src.enclosing_function(call) else None
    if mine is None or any(_names_bf16(v) for v in mine[1]):
        return False
    others = (_compared(other.test) for other in _arms(ctx, arm) if other is not arm)
    return any(o is not None and o[0] == mine[0] and any(_names_bf16(v) for v in o[1]) for o in others)


def _compared(test: ast.expr) -> tuple[str, list[str]] | None:
    """``x == "a"``, ``x in ("a", "b")``, or an ``or`` of such tests of one value: (that value, the constants)."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        parts = [_compared(v) for v in test.values]
        if any(p is None for p in parts) or len({p[0] for p in parts}) != 1:  # type: ignore[index]
            return None
        return parts[0][0], [c for p in parts for c in p[1]]  # type: ignore[index]
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.In))):
        return None
    side = test.comparators[0]
    items = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
    if not isinstance(test.left, (ast.Name, ast.Attribute)) or not items:
        return None
    if not all(isinstance(i, ast.Constant) and isinstance(i.value, str) for i in items):
        return None
    return ast.dump(test.left), [i.value for i in items]  # type: ignore[attr-defined]


def _names_bf16(value: str) -> bool:
    return bool(tokens(value) & {"bf16", "bfloat16"})


def _inherits(ctx: Context, call: ast.Call, name: str) -> bool:
    """`torch.autocast` without a dtype takes the one autocast is set to where the object is made
    (`torch.get_autocast_dtype(device)`): inside another autocast, that autocast's dtype. `torch.cuda.amp.autocast`
    has fp16 as its own default, and a decorator is made where the function is defined, outside any autocast."""
    parent = ctx.src.parents.get(call)
    return name == "torch.autocast" and not (isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) and call in parent.decorator_list)


def _entered_inside_autocast(ctx: Context, call: ast.Call) -> bool:
    """Is `call` made inside another autocast that is on: a ``with`` block of its function around it, or an autocast
    decorating that function? Then it runs in that autocast's dtype (`_inherits`)."""
    def on(node: ast.AST) -> bool:
        return isinstance(node, ast.Call) and node is not call and ctx.qualname(node.func) in AUTOCASTS and not disables_autocast(node, ctx.src)
    for parent, child in ctx.src.steps(call):
        if isinstance(parent, (ast.With, ast.AsyncWith)) and child in parent.body and any(on(i.context_expr) for i in parent.items):
            return True
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return any(on(d) for d in parent.decorator_list)
        if isinstance(parent, (ast.Lambda, ast.ClassDef)):
            return False
    return False


def _bf16_said(ctx: Context, inherits: bool = False) -> str | None:
    """Where the file or its project says bf16: only then is autocast's fp16 default a surprise. For an autocast that
    takes the dtype of the one it runs in (`inherits`), a training file's autocast around this code says nothing:
    there it runs in that autocast's dtype."""
    local = ctx.facts.bf16_run_evidence
    if local is not None:
        return f"this file uses bf16 (line {local.lineno})"
    for evidence in (None if inherits else ctx.project.autocast, ctx.project.half_model, ctx.project.half):
        if evidence is not None and "bf16" in evidence.dtypes:
            return f"this code runs in bf16: {evidence.describe()}"
    if ctx.project.trains_bf16 is not None:
        return f"this project configures bf16 training: {ctx.project.trains_bf16.describe()}"
    return None


def _runs_only_bf16(ctx: Context) -> bool:
    """Is bf16 all the precision this file's code runs under, so that `dtype=torch.bfloat16` changes no run but
    the ones that get fp16 by mistake? The file names bf16 as a dtype or a training file's context reaches it,
    every context that reaches it and every training config of its project is bf16, and nothing in the file says
    fp16, reads a bf16 switch or holds a GradScaler (it is ready for fp16 runs)."""
    project = ctx.project
    if not project.precisions <= {BF16} or not ctx.facts.never_fp16:
        return False
    if not ctx.facts.bf16_dtype_named and all(e is None for e in (project.autocast, project.half_model, project.half)):
        return False
    return next(calls_named(ctx, GRAD_SCALERS), None) is None


def _off_in_every_config(ctx: Context, call: ast.Call, name: str) -> bool:
    """`enabled=` is a switch read from the config (``enabled=not self.disable_first_stage_autocast``, the config's
    key stored on the object), and every value the project's YAML configs write for that key turns the autocast off
    (``disable_first_stage_autocast: true`` in each): none of the project's shipped runs enters it. A config that
    leaves the key out takes the code's default; the shipped ones are the runs the project makes."""
    values = ctx.project.config_values
    enabled = autocast_argument(call, name, "enabled")
    if values is None or enabled is None:
        return False
    negated = isinstance(enabled, ast.UnaryOp) and isinstance(enabled.op, ast.Not)
    switch = enabled.operand if negated else enabled  # type: ignore[attr-defined]
    # the key kept on the object itself (``self.disable_first_stage_autocast = config.get(...)``), or a config read
    own = isinstance(switch, ast.Attribute) and isinstance(switch.value, ast.Name) and switch.value.id in ("self", "cls")
    path = (switch.attr,) if own else key_path(switch)  # type: ignore[union-attr]
    written = values.lookup(path) if path and "autocast" in path[-1].lower() else []
    return bool(written) and all(v.value in ("true", "false") and (v.value == "true") == negated for v in written)


def _not_fp16_by_default(ctx: Context, call: ast.Call, name: str) -> bool:
    """Autocast turned off (it needs no dtype; a wrapper's `enabled` parameter every caller passes False counts, and
    a config switch every project config turns off), or on a device whose default is bf16 (CPU, XPU)."""
    if disables_autocast(call, ctx.src) or _off_in_every_config(ctx, call, name):
        return True
    if name != "torch.autocast":
        return False
    device = autocast_argument(call, name, "device_type")
    values = [device.body, device.orelse] if isinstance(device, ast.IfExp) else [device]
    return all(isinstance(v, ast.Constant) and v.value != "cuda" for v in values)


def _launched_fp16(ctx: Context) -> str:
    """Every launch line of the project that starts this script picks fp16 and none names bf16 (`Facts.launched_fp16`),
    which autocast's default matches: said in the message of a note, since a bf16 run someone else starts still gets
    fp16. "" otherwise."""
    where = ctx.facts.launched_fp16
    return "" if where is None else (f"; every launch of this script in the project picks fp16 ({where}, ...), as this "
                                     "autocast does: only a bf16 run someone else starts gets fp16 here")


def _needs_no_dtype(ctx: Context, call: ast.Call, name: str) -> bool:
    """The call has a dtype, may get one through `**kwargs`, is off or bf16 by default on its device, or sits in a
    branch only fp16 runs take, or only a torch too old for `dtype=` takes."""
    if autocast_argument(call, name, "dtype") is not None:
        return True
    if has_star_kwargs(call) and not _kwargs_lack_dtype(ctx, call, name):
        return True
    return _not_fp16_by_default(ctx, call, name) or ctx.flow.fp16_branch(call) is not None or _older_torch_fallback(ctx, call)


def _said_of_file(ctx: Context, inherits: bool) -> tuple[str, dict[str, str]]:
    """Where the file or its project says bf16 ("" where nothing does, or where an unconditional GradScaler makes
    fp16 AMP deliberate), and the rewrite to offer where bf16 is all the code runs under."""
    said = _bf16_said(ctx, inherits) or ""
    if said and _always_scaled(ctx) is not None:
        said = ""
    return said, ({"dtype": "torch.bfloat16"} if said and _runs_only_bf16(ctx) else {})


@code_check("AMP107", triggers=("autocast",), project=True)
def autocast_without_dtype(ctx: Context) -> Iterator[CodeHit]:
    # Without bf16 anywhere in view, fp16 is what the author asked for, and paired with an unconditional GradScaler
    # it is deliberate fp16 AMP; saying "whatever the run is configured for" there would state a guess.
    of_file: dict[bool, tuple[str, dict[str, str]]] = {}
    for call, name in calls_named(ctx, AUTOCASTS - {"torch.cpu.amp.autocast"}):
        if _needs_no_dtype(ctx, call, name):
            continue
        inherits = _inherits(ctx, call, name)
        if inherits and _entered_inside_autocast(ctx, call):
            continue  # it runs in the dtype of the autocast around it
        tests = _else_of(ctx, call)
        through = _conjoined_with_bf16(tests)
        if through is not None:
            yield call, (f"autocast without `dtype=` runs in float16 on CUDA, and bf16 runs reach this `else`: the bf16 branch "
                         f"(line {through.lineno}) also needs `{ast.unparse(through)[:60]}`")
            continue
        # the dtype is passed on where the call is built, a bf16 run takes another branch, or the autocast is switched
        # on with its loss scaler (fp16 AMP on purpose)
        if has_star_kwargs(call) or _bf16_runs_elsewhere(ctx, call, tests) or _scaled_with(ctx, call):
            continue
        near = bf16_in_function(ctx, call)
        if near is not None:
            said, rewrite = f"this function uses bf16 (line {near.lineno})", {}
        else:
            if inherits not in of_file:
                of_file[inherits] = _said_of_file(ctx, inherits)
            said, rewrite = of_file[inherits]
        if not said:
            continue
        made = ", made outside any other autocast," if inherits else ""
        message = f"autocast without `dtype=`{made} runs in float16 on CUDA, while {said}"
        launched = _launched_fp16(ctx)  # read once per file (`Facts.launched_fp16` is cached)
        if launched:
            yield call, message + launched, Severity.INFO
        else:
            yield call, message, None, rewrite


@code_fix("AMP107")
def add_bf16_dtype(module: Any, lines: Mapping[int, tuple[Mapping[str, Any], ...]]) -> Any:
    """``torch.autocast("cuda")`` -> ``torch.autocast("cuda", dtype=torch.bfloat16)`` at the lines where the detector
    found bf16 to be all the precision the code runs under (`_runs_only_bf16`; the finding's `dtype` detail), in a
    module that imports `torch` to spell it. Elsewhere the right dtype is the run's, which a person passes."""
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider

    if not imports_torch(module):
        return module

    class AddDtype(cst.CSTTransformer):
        METADATA_DEPENDENCIES = (PositionProvider,)

        def leave_Call(self, original: Any, updated: Any) -> Any:
            name = dotted(original.func)
            wanted = asked(lines, self.get_metadata(PositionProvider, original).start.line, "dtype")
            if wanted is None or name is None or name.rsplit(".", 1)[-1] != "autocast" or any(a.star for a in original.args):
                return updated
            return with_keyword(updated, "dtype", cst.parse_expression(wanted))

    return MetadataWrapper(module).visit(AddDtype())
