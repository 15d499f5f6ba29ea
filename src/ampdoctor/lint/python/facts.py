"""File-level facts several checks depend on: is autocast (or a framework's mixed precision) in play, which
modules are cast to half precision, is there any bf16 in the file, is TF32 allowed for fp32 matmuls."""

from __future__ import annotations

import ast
import builtins
import functools
from dataclasses import dataclass
from typing import Iterator

from ampdoctor.dtypes import ROPE_WORDS
from ampdoctor.lint.python.dataflow import BF16, FP16, HALF, STRING_DTYPES, Dataflow, autocast_argument
from ampdoctor.lint.python.kind import trains_anywhere
from ampdoctor.lint.python.resolve import argument, dotted, has_star_kwargs, is_dataclass, keyword, last_identifier, tokens
from ampdoctor.lint.python.source import SourceFile

AUTOCASTS = frozenset({"torch.autocast", "torch.cuda.amp.autocast", "torch.cpu.amp.autocast"})
# Frameworks whose training step runs under autocast when their config call asks for half mixed precision (HF's
# TrainingArguments and TRL's configs, accelerate's Accelerator, Lightning's Trainer and Fabric, composer's Trainer):
# that call is the script's autocast. Not where the call hands the step to DeepSpeed, whose engine casts the weights.
AUTOCASTING_FRAMEWORKS = frozenset({"transformers", "trl", "accelerate", "lightning", "pytorch_lightning", "lightning_fabric",
                                    "composer"})
MODEL_TOKENS = frozenset({
    "model", "models", "module", "net", "network", "transformer", "unet", "vae", "encoder", "decoder", "backbone",
    "llm", "gpt", "lm", "policy", "critic", "actor", "generator", "discriminator", "classifier", "student",
    "teacher", "ema", "pipe", "pipeline", "denoiser", "dit", "vit",
})
# Modules that produce logits: kept in fp32 after a half cast, the loss is fp32 too.
_HEAD_WORDS = frozenset({"head", "lm", "classifier", "output", "out", "logits", "unembed", "unembedding", "proj"})
# keyword=value pairs by which a framework object turns on autocast-style mixed precision
MIXED_PRECISION_KEYWORDS = frozenset({"mixed_precision", "precision", "amp_dtype", "autocast_dtype"})
# ... and with the bf16/fp16 flags, every keyword `half_setting` reads
HALF_SWITCHES = MIXED_PRECISION_KEYWORDS | {"bf16", "fp16"}


# Reads of an environment variable with a default (`os.environ.get(NAME, default)`, `os.getenv(NAME, default)`).
_ENV_READS = frozenset({"os.environ.get", "os.getenv"})


# Statements that hold other statements: a call in their body runs only on some paths (`_in_broken_branch`).
_COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.FunctionDef,
             ast.AsyncFunctionDef, ast.ClassDef, ast.Match)
_BUILTIN_NAMES = frozenset(dir(builtins))
# Calls through which a file reads its names without naming them: its globals or locals as a mapping, code it runs.
_READS_UNSEEN = frozenset({"globals", "locals", "vars", "exec", "eval"})


# An option's value that no constant says: a default computed in code, a value read from a shell variable.
_UNKNOWN = object()


def _option_default(call: ast.Call) -> object:
    """What one ``parser.add_argument(...)`` holds when the command line does not name it: its constant default,
    False for a ``store_true`` flag (True for ``store_false``), None where it has none; `_UNKNOWN` otherwise."""
    default = keyword(call, "default")
    if default is None:
        action = keyword(call, "action")
        flag = action.value if isinstance(action, ast.Constant) else None
        return {"store_true": False, "store_false": True}.get(flag) if flag is not None else None
    return default.value if isinstance(default, ast.Constant) else _UNKNOWN


def _option(call: ast.Call) -> tuple[list[str], set, set]:
    """One ``parser.add_argument(...)``: the attribute names it sets, the constants it may set them to, and the one it
    holds when the command line does not name it (its default; empty when that is no constant)."""
    flags = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("--")]
    default = keyword(call, "default")
    offered = [default]
    choices = keyword(call, "choices")
    offered += list(choices.elts) if isinstance(choices, (ast.List, ast.Tuple, ast.Set)) else []
    values = {v.value for v in offered if isinstance(v, ast.Constant) and isinstance(v.value, (str, bool))}
    defaults = {default.value} if isinstance(default, ast.Constant) and isinstance(default.value, (str, bool)) else set()
    action = keyword(call, "action")
    if isinstance(action, ast.Constant) and action.value == "store_true":
        values.add(True)
    dest = keyword(call, "dest")
    names = [dest.value] if isinstance(dest, ast.Constant) and isinstance(dest.value, str) else [f[2:].replace("-", "_") for f in flags]
    return names, values, defaults


def _known(parts: list[frozenset | None]) -> frozenset | None:
    """What a run reads through several places (branches, bindings, table entries): all of theirs, or None (not known)
    where one of them is not known."""
    return None if any(p is None for p in parts) else frozenset().union(*parts)


def _half_mode(keyword_name: str, text: str) -> bool:
    """A precision setting that runs autocast in a half dtype: Lightning's "bf16-mixed", composer's "amp_bf16",
    accelerate's ``mixed_precision="fp16"``."""
    half = bool(STRING_DTYPES.get(text, frozenset()) & HALF)
    return "mixed" in text or (half and (keyword_name == "mixed_precision" or text.startswith("amp_")))


def hands_to_deepspeed(call: ast.Call) -> bool:
    """A framework config call that runs DeepSpeed: a ``deepspeed=``/``deepspeed_plugin=`` config that is set, or a
    ``strategy``/``plugins`` that names DeepSpeed (``"deepspeed_stage_2"``, ``DeepSpeedStrategy(...)``). Other
    keywords are not read: ``output_dir="runs/deepspeed"`` says nothing of the engine."""
    for kw in call.keywords:
        if kw.arg and "deepspeed" in kw.arg:
            if not (isinstance(kw.value, ast.Constant) and kw.value.value in (None, False, "")):
                return True
        elif kw.arg in ("strategy", "plugins") and any(_names_deepspeed(n) for n in ast.walk(kw.value)):
            return True
    return False


def _names_deepspeed(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and "deepspeed" in node.value.lower()
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return "deepspeed" in name.lower()


def half_setting(name: str, value: object) -> frozenset[str]:
    """The half dtypes a framework setting turns mixed precision on in (empty: none): ``bf16=True`` (a flag),
    ``mixed_precision="fp16"``, ``precision="bf16-mixed"``, whether written as a keyword in code or passed on a
    launch line."""
    if name in ("bf16", "fp16"):
        return frozenset({name}) if value is True else frozenset()
    if name in MIXED_PRECISION_KEYWORDS and isinstance(value, str) and _half_mode(name, value.lower()):
        return STRING_DTYPES.get(value.lower(), HALF) & HALF
    return frozenset()


@dataclass(frozen=True)
class ModelCast:
    node: ast.Call
    dtypes: frozenset
    name: str | None  # the variable the cast model ends up in, when known
    local_class: str | None = None  # the class of the cast model, when this file defines it


# Methods of a module that return the module itself, chained before or after its cast (``Net().eval().half().cuda()``).
_MODULE_METHODS = ("to", "cuda", "eval", "train", "requires_grad_")


def is_model_expr(expr: ast.AST, src: SourceFile) -> bool:
    """A module-valued expression: ``model``, ``self.unet``, ``GPT(cfg)``, ``AutoModel.from_pretrained(...)``."""
    if isinstance(expr, ast.Call):
        func = expr.func
        if isinstance(func, ast.Attribute) and func.attr in ("from_pretrained", "from_config") + _MODULE_METHODS:
            return func.attr in ("from_pretrained", "from_config") or is_model_expr(func.value, src)
        ident = last_identifier(func)
        qualname = src.imports.qualname(func)
        # a class of this file or of the project (`from lm.model import TinyLM`), not torch's own tensors
        return bool(ident and ident[:1].isupper() and (qualname is None or not qualname.startswith(("torch.", "numpy."))))
    ident = last_identifier(expr) if isinstance(expr, (ast.Name, ast.Attribute)) else None
    if not ident:
        return False
    words = tokens(ident)
    return bool(words & MODEL_TOKENS) and not words & ROPE_WORDS


_FULL_PRECISION = frozenset({"torch.float32", "torch.float", "torch.float64", "torch.double"})


def _made_call(partial: ast.Call) -> ast.Call:
    """The call a ``functools.partial(f, *args, **kwargs)`` makes when called bare: ``f(*args, **kwargs)``."""
    return ast.copy_location(ast.Call(func=partial.args[0], args=partial.args[1:], keywords=partial.keywords), partial)


def disables_autocast(call: ast.Call, src: SourceFile) -> bool:
    """A call that turns autocast off for what it wraps: ``torch.autocast(dev, enabled=False)`` (any spelling) or
    ``torch.autocast(dev, dtype=torch.float32)``,
    a wrapper named like autocast with ``enabled=False`` (transformers' relatively imported ``maybe_autocast``),
    or ``custom_fwd(cast_inputs=...)``, which runs the forward with autocast disabled."""
    name = src.imports.qualname(call.func)
    if name in AUTOCASTS:
        enabled = autocast_argument(call, name, "enabled")
        dtype = autocast_argument(call, name, "dtype")
        if dtype is not None and _full_precision(dtype, call, src):
            return True  # autocast to fp32 keeps its body in fp32 (CUDA autocast even disables itself for it)
    elif "autocast" in tokens(last_identifier(call.func) or ""):
        enabled = keyword(call, "enabled")
    else:
        return (name or last_identifier(call.func) or "").endswith("custom_fwd") and keyword(call, "cast_inputs") is not None
    if isinstance(enabled, ast.Name):
        # a wrapper's own parameter (`def maybe_autocast(device_type, enabled=True)`), off where every caller passes False
        passed = [value for _, value in src.bindings(enabled, src.scope(call))]
        return bool(passed) and all(isinstance(v, ast.Constant) and v.value is False for v in passed)
    return isinstance(enabled, ast.Constant) and enabled.value is False


def _full_precision(dtype: ast.expr, call: ast.Call, src: SourceFile) -> bool:
    """Is an autocast's `dtype` fp32 or fp64: spelled so, or a name or attribute every assignment of which is
    (``self.precision = torch.float32`` in ``__init__``, then ``autocast(dtype=self.precision)``)?"""
    if src.imports.qualname(dtype) in _FULL_PRECISION:
        return True
    if not isinstance(dtype, (ast.Name, ast.Attribute)):
        return False
    values = [v for _, v in src.bindings(dtype, src.scope(call))]
    return bool(values) and all(v is not None and src.imports.qualname(v) in _FULL_PRECISION for v in values)


# Identifier words by which code handles autocast state (`is_autocast_enabled`, `_get_active_autocast_contexts`,
# `ctx.torch_gpu_amp_ctx`): a Function's forward or backward naming one records or restores it.
_AUTOCAST_STATE_WORDS = frozenset({"autocast", "amp"})


def handles_autocast(node: ast.AST) -> bool:
    """Does `node` name autocast or its state anywhere (``torch.is_autocast_enabled()``, ``torch.cuda.amp.autocast(
    **ctx.autocast_kwargs)``, ``ctx.amp_state``)?"""
    return any(isinstance(n, (ast.Attribute, ast.Name)) and tokens(n.attr if isinstance(n, ast.Attribute) else n.id) & _AUTOCAST_STATE_WORDS
               for n in ast.walk(node))


def enters_autocast(expr: ast.expr, src: SourceFile) -> bool:
    """A ``with`` item that names autocast or its state anywhere (`handles_autocast`: ``torch.autocast(...)``,
    ``(torch.autocast("cuda") if amp else nullcontext())``) and does not turn it off."""
    return handles_autocast(expr) and not (isinstance(expr, ast.Call) and disables_autocast(expr, src))


def reenters_autocast(fn: ast.FunctionDef, src: SourceFile) -> bool:
    """A (backward) method that holds a ``with <...autocast...>(...)`` that does not turn autocast off: it runs its
    body under autocast again, in the state its forward recorded (``torch.cuda.amp.autocast(**ctx.autocast_kwargs)``)."""
    return any(isinstance(node, ast.With) and any(enters_autocast(i.context_expr, src) for i in node.items)
               for node in ast.walk(fn))


def _raises_context(call: ast.Call, src: SourceFile) -> bool:
    """``pytest.raises(...)`` (however imported), ``self.assertRaises(...)``/``assertRaisesRegex(...)``."""
    name = src.imports.qualname(call.func) or ""
    return name in ("pytest.raises", "_pytest.python_api.raises") or last_identifier(call.func) in ("assertRaises", "assertRaisesRegex")


_FP16_WORDS = frozenset({"fp16", "float16", "half"})


class Facts:
    def __init__(self, src: SourceFile, flow: Dataflow, launched: tuple[tuple[str, str | bool, bool], ...] = (),
                 runs: tuple[tuple[str, tuple[tuple[str, str | bool, bool], ...]], ...] = ()) -> None:
        # `launched`: the options the project's shell launchers pass this script (name, value, written literally);
        # `runs`: the same per launch line, with where it is written
        self.src, self.flow, self.launched, self.runs = src, flow, launched, runs
        self._reach_cache: dict[ast.AST, set[ast.AST]] = {}  # `_reached_defs`, by autocast region

    @functools.cached_property
    def autocast_calls(self) -> list[tuple[ast.Call, str]]:
        out = []
        for call in self.src.calls:
            name = self.src.imports.qualname(call.func)
            if name in AUTOCASTS:
                out.append((call, name))
        return out

    @functools.cached_property
    def mixed_precision(self) -> list[ast.AST]:
        """Places that may turn autocast on: an enabled autocast, ``accelerator.autocast()``, or a framework set up
        for mixed precision (``Accelerator(mixed_precision="bf16")``, ``TrainingArguments(bf16=True)``), also where
        a run of the file may choose it (`_run_values`). For a rule that fires on code run under autocast."""
        return self._mixed_precision(certain=False)

    @functools.cached_property
    def mixed_precision_on(self) -> list[ast.AST]:
        """The places of `mixed_precision` that turn it on in a run the command line does not change (a literal, an
        option's default, both branches of a conditional): for a rule that autocast, being on, makes moot. An offered
        ``--mixed_precision bf16`` whose default is ``no`` leaves the default run without autocast."""
        return self._mixed_precision(certain=True)

    def framework_half_dtypes(self, call: ast.Call, certain: bool = False) -> frozenset[str]:
        """The half dtypes a framework's config call may run mixed precision in, read from its switches in this file's
        runs (``precision="bf16-mixed"``: bf16; ``bf16=args.bf16`` with a flag: bf16); with `certain`, in a run whose
        command line names no option (`_run_values`)."""
        switches = [kw for kw in call.keywords if kw.arg in HALF_SWITCHES]  # asked of every call of the file: most have none
        if not switches:
            return frozenset()
        return frozenset().union(*(half_setting(kw.arg, v) for kw in switches for v in self._run_values(kw.value, 0, certain)))

    def _mixed_precision(self, certain: bool) -> list[ast.AST]:
        return [call for call, switched in self._mixed_precision_calls
                if not switched or self.framework_half_dtypes(call, certain)]

    @functools.cached_property
    def _mixed_precision_calls(self) -> list[tuple[ast.Call, bool]]:
        """The calls `_mixed_precision` may give, each with whether it is one only if a framework's half
        switch holds a half mode in the runs asked about (`framework_half_dtypes`); the others turn autocast on in
        every run. One pass over the file's calls for both `mixed_precision` and `mixed_precision_on`."""
        out: list[tuple[ast.Call, bool]] = []
        for call, name in self.autocast_calls:
            if not disables_autocast(call, self.src):  # enabled=False, or an fp32 region inside an outer autocast
                out.append((call, False))
        for call in self.src.calls:
            if isinstance(call.func, ast.Attribute) and call.func.attr == "autocast" and self.src.imports.qualname(call.func) is None:
                out.append((call, False))
                continue
            if not call.args and not call.keywords:
                continue  # neither test below applies: the common ``x.float()``, ``super()``
            if self._autocast_partial(call):
                out.append((call, False))  # `partial(torch.autocast, device_type="hpu", dtype=torch.bfloat16)`: entered where called
                continue
            if any(kw.arg in HALF_SWITCHES for kw in call.keywords):
                out.append((call, True))  # once per call
        return out

    @functools.cached_property
    def prepared_names(self) -> frozenset[str]:
        """What a framework's ``prepare`` wraps (``accelerator.prepare(unet, optimizer, ...)``, and the names it hands
        back): their forward runs under the framework's autocast, and accelerate's returns fp32 outputs
        (`convert_outputs_to_fp32`) where its mixed precision is on."""
        out: set[str] = set()
        for call in self.src.calls:
            if not (isinstance(call.func, ast.Attribute) and call.func.attr.startswith("prepare")):
                continue
            out.update(n for a in call.args if (n := dotted(a)) is not None)
            bound = self.src.parents.get(call)
            if isinstance(bound, ast.Assign):
                for target in bound.targets:
                    for t in target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]:
                        if (n := dotted(t)) is not None:
                            out.add(n)
        return frozenset(out)

    def _autocast_partial(self, call: ast.Call) -> bool:
        """``functools.partial(torch.autocast, ...)`` that does not turn it off: an autocast factory, the context
        manager the code enters by calling it (``with ctx_manager():``). Its arguments are autocast's own, so the
        call it makes (``torch.autocast(...)`` with them) is judged as one written out (`disables_autocast`:
        ``enabled=False``, or an fp32 dtype)."""
        if not call.args or self.src.imports.qualname(call.func) != "functools.partial":
            return False
        if self.src.imports.qualname(call.args[0]) not in AUTOCASTS:
            return False
        return not disables_autocast(_made_call(call), self.src)

    def _run_values(self, expr: ast.AST, depth: int, certain: bool = False) -> frozenset:
        """The constants (strings, booleans) a setting may hold in this file's runs: a literal, either branch of
        ``"fp16" if args.fp16 else "no"``, what a name is bound to, and for ``args.mixed_precision`` the default and
        the choices of the file's ``add_argument("--mixed_precision", ...)`` (True for a ``store_true`` flag) or the
        default of a dataclass field of that name (HfArgumentParser's configs), the default of
        ``os.environ.get("MIXED_PRECISION", "bf16")``. A script that offers a half mode runs in it when asked to, as
        ``autocast(dtype=cfg.dtype)`` does: which runs use it is for the command line to say. With `certain`, those
        it holds in a run whose command line names no option: an option's default, what both branches of a
        conditional and every binding of a name agree on."""
        if depth > 3:
            return frozenset()
        if isinstance(expr, ast.Constant):
            return frozenset({expr.value}) if isinstance(expr.value, (str, bool)) else frozenset()
        if isinstance(expr, ast.IfExp):
            body, orelse = self._run_values(expr.body, depth + 1, certain), self._run_values(expr.orelse, depth + 1, certain)
            return body & orelse if certain else body | orelse
        if isinstance(expr, ast.Call) and (self.src.imports.qualname(expr.func) or "") in _ENV_READS and len(expr.args) == 2:
            return self._run_values(expr.args[1], depth + 1, certain)  # os.environ.get("MIXED_PRECISION", "bf16"): its default
        if not isinstance(expr, (ast.Name, ast.Attribute)):
            return frozenset()
        bound = [v for _, v in self.src.bindings(expr, self.src.scope(expr)) if v is not None]
        if bound:
            values = [self._run_values(v, depth + 1, certain) for v in bound]
            return frozenset.intersection(*values) if certain else frozenset().union(*values)
        options = self._options[1 if certain else 0]
        return options.get(expr.attr, frozenset()) if isinstance(expr, ast.Attribute) else frozenset()

    @functools.cached_property
    def _options(self) -> tuple[dict[str, frozenset], dict[str, frozenset]]:
        """What each command-line option of this file (``--mixed_precision``/``--mixed-precision``, by its
        attribute name: its `dest` where given) may hold: its default and choices, True for a flag that
        ``store_true`` turns on; and the defaults of dataclass fields (HfArgumentParser's configs) by their name.
        Second, the same for a run that names no option: the defaults alone. A value a launcher of the project
        passes (`launched`) is one the option may hold, and, written literally, one a run holds as surely as the
        default (the launcher's run); one read from a shell variable only may be."""
        may: dict[str, set] = {}
        default: dict[str, set] = {}
        for call in self._add_arguments:
            names, values, defaults = _option(call)
            for name in names:
                may.setdefault(name, set()).update(values)
                default.setdefault(name, set()).update(defaults)
        for cls in self.src.classes:
            # a config class's fields (HfArgumentParser and its kin take dataclasses), not any class's attributes
            if not is_dataclass(cls):
                continue
            for stmt in cls.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
                    value = keyword(stmt.value, "default") if isinstance(stmt.value, ast.Call) else stmt.value
                    if isinstance(value, ast.Constant) and isinstance(value.value, (str, bool)):
                        may.setdefault(stmt.target.id, set()).add(value.value)
                        default.setdefault(stmt.target.id, set()).add(value.value)
        for name, value, literal in self.launched:
            may.setdefault(name, set()).add(value)
            if literal:
                default.setdefault(name, set()).add(value)
        return {k: frozenset(v) for k, v in may.items()}, {k: frozenset(v) for k, v in default.items()}

    @functools.cached_property
    def _defaults(self) -> dict[str, object]:
        """Each command-line option of this file (by its attribute name) and what it holds when a run does not name
        it (`_option_default`; `_UNKNOWN` where two options of that name disagree)."""
        out: dict[str, object] = {}
        for call in self._add_arguments:
            default = _option_default(call)
            for name in _option(call)[0]:
                out[name] = default if out.get(name, default) == default else _UNKNOWN
        return out

    def choices(self, name: str) -> frozenset[str] | None:
        """The literal ``choices=`` of the file's ``add_argument`` for option `name` (its attribute name): all the
        strings it can hold, since argparse refuses any other; None where no such option lists them."""
        for call in self._add_arguments:
            offered = keyword(call, "choices")
            if name in _option(call)[0] and isinstance(offered, (ast.List, ast.Tuple, ast.Set)) and offered.elts \
                    and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in offered.elts):
                return frozenset(e.value for e in offered.elts)
        return None

    @functools.cached_property
    def _add_arguments(self) -> list[ast.Call]:
        """The file's ``parser.add_argument(...)`` calls."""
        return [c for c in self.src.calls if isinstance(c.func, ast.Attribute) and c.func.attr == "add_argument"]

    def _each_run(self, read) -> list[tuple[str | None, frozenset]] | None:
        """`read` in each run the project makes of this file: one per launch line that starts it (where it is
        written; an option the line does not pass holds its default), or, where nothing launches it, the run whose
        command line names no option (where: None). None where `read` does not know some run's."""
        out = []
        for where, flags in self.runs or ((None, ()),):
            given: dict[str, object] = {}
            for name, value, literal in flags:
                given[name] = value if literal and given.get(name, value) == value else _UNKNOWN
            values = read(given)
            if values is None:
                return None
            out.append((where, values))
        return out

    @functools.cached_property
    def launched_fp16(self) -> str | None:
        """Where the first launch line is, when every launch line of the project that starts this file runs it in
        fp16 (``--mixed_precision=fp16``; an option a line does not pass holds its default) and none names bf16 in
        any option (``--teacher_dtype bf16``): the project's own runs are fp16 only. None otherwise, and where a line
        passes a half switch through a shell variable."""
        if not self.runs or any(STRING_DTYPES.get(str(value).lower()) == BF16 for _, flags in self.runs for _, value, _ in flags):
            return None

        def half(given: dict[str, object]) -> frozenset | None:
            out: frozenset = frozenset()
            for name in (set(given) | set(self._defaults)) & HALF_SWITCHES:
                value = given.get(name, self._defaults.get(name))
                if value is _UNKNOWN:
                    return None
                out |= half_setting(name, value)
            return out

        runs = self._each_run(half)
        return runs[0][0] if runs is not None and all(dtypes == FP16 for _, dtypes in runs) else None

    def _in_run(self, expr: ast.AST, given: dict[str, object], depth: int) -> frozenset | None:
        if depth > 4:
            return None
        if isinstance(expr, ast.Constant):
            return frozenset({expr.value})
        if isinstance(expr, ast.BoolOp) and isinstance(expr.op, ast.Or):
            return self._or_in_run(expr, given, depth)
        if isinstance(expr, ast.IfExp):
            taken = self._taken(expr, given, depth)
            return None if taken is None else _known([self._in_run(b, given, depth + 1) for b in taken])
        if not isinstance(expr, (ast.Name, ast.Attribute)):
            return None
        bound = self.src.bindings(expr, self.src.scope(expr))
        if bound:
            if isinstance(expr, ast.Name) and all(v is None for _, v in bound) and self.src.is_parameter(expr):
                return self._passed_in_run(expr, given, depth)
            return _known([self._in_run(v, given, depth + 1) if v is not None and v is not expr else None for _, v in bound])
        if not isinstance(expr, ast.Attribute) or expr.attr not in self._defaults:
            return None
        value = given.get(expr.attr, self._defaults[expr.attr])
        return None if value is _UNKNOWN else frozenset({value})

    def _passed_in_run(self, param: ast.Name, given: dict[str, object], depth: int) -> frozenset | None:
        """A parameter without a default of a method its class calls as ``self.name(...)`` (or of a module-level
        function the file calls by name), in a run: what every such call passes for it, in that run (the setup
        method handed ``self.args.grad_precision``). None where one passes what the run does not fix, or where the
        function is called nowhere in the file, or by a star argument."""
        fn = self.src.enclosing_function(param)
        if fn is None:
            return None
        positional = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
        method = isinstance(self.src.parents.get(fn), ast.ClassDef)
        calls = self._calls_of_function(fn)
        index = positional.index(param.id) - method if param.id in positional else None
        parts: list[frozenset | None] = []
        for call in calls:
            if has_star_kwargs(call):
                return None
            value = argument(call, index, param.id) if index is not None and index >= 0 else keyword(call, param.id)
            parts.append(self._in_run(value, given, depth + 1) if value is not None else None)
        return _known(parts) if parts else None

    def option_only(self, node: ast.AST) -> str | None:
        """The test of a branch that holds `node` and that no run the project makes of this file takes (`_each_run`:
        each launch line that starts it, or the run with the script's defaults): ``if args.fp16:`` over a
        ``store_true`` flag that no launcher passes; for an autocast call, its ``enabled=`` argument where no run
        sets it on. Its text, or None where some run may take every branch that holds the node and turn it on, or
        one is not known."""
        enabled = keyword(node, "enabled") if isinstance(node, ast.Call) else None
        if enabled is not None:  # ``autocast(enabled=args.amp)``: entered in every run, on in none
            runs = self._each_run(lambda given: self._in_run(enabled, given, 0))
            if runs is not None and all(not any(values) for _, values in runs):
                return ast.unparse(enabled)
        child = node
        for parent in self.src.ancestors(node):
            if isinstance(parent, (ast.If, ast.IfExp)) and child is not parent.test \
                    and (child in parent.body if isinstance(parent.body, list) else child is parent.body):
                runs = self._each_run(lambda given, test=parent.test: self._in_run(test, given, 0))
                if runs is not None and all(not any(values) for _, values in runs):
                    return ast.unparse(parent.test)
            if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                return None
            child = parent
        return None

    def _calls_of_function(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.Call]:
        """The file's calls of a method as ``self.name(...)`` within its class, or of a module-level function by name."""
        owner = self.src.parents.get(fn)
        if isinstance(owner, ast.ClassDef):
            return [c for c in self.src.calls if isinstance(c.func, ast.Attribute) and c.func.attr == fn.name
                    and isinstance(c.func.value, ast.Name) and c.func.value.id == "self" and self.src.enclosing_class(c) is owner]
        return self.src.calls_of(fn.name) if owner is self.src.tree else []

    def _or_in_run(self, expr: ast.BoolOp, given: dict[str, object], depth: int) -> frozenset | None:
        """``a or b``: the first operand that is true, else the last one."""
        out: set = set()
        values: frozenset = frozenset()
        for operand in expr.values:
            found = self._in_run(operand, given, depth + 1)
            if found is None:
                return None
            values = found
            out |= {v for v in values if v}
            if all(values):
                return frozenset(out)
        return frozenset(out | {v for v in values if not v})

    def _taken(self, expr: ast.IfExp, given: dict[str, object], depth: int) -> list[ast.AST] | None:
        """The branches of ``x if c else y`` a run takes (both where `c` may be either); None where `c` is unknown."""
        test = self._in_run(expr.test, given, depth + 1)
        if test is None:
            return None
        return [b for b, taken in ((expr.body, any(test)), (expr.orelse, not all(test))) if taken]

    def dtypes_per_run(self, expr: ast.AST, scope: ast.AST | None = None) -> list[tuple[str | None, frozenset]] | None:
        """The dtypes a dtype expression names in each run (`_each_run`), reading the file's options, names bound in
        the file and ``a or b`` (`_in_run`): an entry of a table looked up by a key the
        runs fix (``{"bf16": torch.bfloat16, ...}[args.grad_precision or args.precision]``), an option that names a
        dtype (``--reduce_dtype bf16``), the branch of ``x if args.pure_bf16 else y`` a run takes. None where a
        run's is not known."""
        return self._each_run(lambda given: self._dtypes_in_run(expr, given, scope, 0))

    def _dtypes_in_run(self, expr: ast.AST, given: dict[str, object], scope: ast.AST | None, depth: int) -> frozenset | None:
        if depth > 4:
            return None
        if isinstance(expr, ast.IfExp):
            taken = self._taken(expr, given, depth)
            return None if taken is None else _known([self._dtypes_in_run(b, given, scope, depth + 1) for b in taken])
        if isinstance(expr, ast.Subscript):
            return self._looked_up_in_run(expr, given, scope, depth)
        values = self._in_run(expr, given, depth + 1)
        if values is None:
            return self._dtype_named(expr, given, scope, depth)
        return _known([frozenset() if v is None else STRING_DTYPES.get(v.lower()) if isinstance(v, str) else None for v in values])

    def _looked_up_in_run(self, expr: ast.Subscript, given: dict[str, object], scope: ast.AST | None, depth: int) -> frozenset | None:
        """``TABLE[key]``: the entries of a dict literal for the keys the run holds (a key it lacks names nothing)."""
        table = self.flow.table_of(expr, scope)
        keys = self._in_run(expr.slice, given, depth + 1) if table is not None else None
        if table is None or keys is None:
            return None
        entries = {k.value: v for k, v in zip(table.keys, table.values) if isinstance(k, ast.Constant)}
        return _known([self.flow.dtype_of(entries[k], scope) for k in keys if k in entries])

    def _dtype_named(self, expr: ast.AST, given: dict[str, object], scope: ast.AST | None, depth: int) -> frozenset | None:
        """A dtype object in a run: what the names it reads are bound to, in that run, or a dtype the code names
        outright (``torch.bfloat16``); None for one that only says what it may be."""
        bound = self.src.bindings(expr, scope or self.src.scope(expr)) if isinstance(expr, (ast.Name, ast.Attribute)) else []
        if bound:
            return _known([self._dtypes_in_run(v, given, scope, depth + 1) if v is not None and v is not expr else None for _, v in bound])
        found = self.flow.dtype_of(expr, scope)
        return found if found is not None and len(found) <= 1 else None

    @functools.cached_property
    def model_casts(self) -> list[ModelCast]:
        """Whole modules cast to bf16/fp16 (``model.to(torch.bfloat16)``, ``.half()``, ``from_pretrained(torch_dtype=...)``)."""
        out: list[ModelCast] = []
        for call in self.src.calls:
            func = call.func
            if not isinstance(func, ast.Attribute):
                continue
            dtypes = None
            if func.attr in ("to", "half", "bfloat16") and is_model_expr(func.value, self.src):
                dtypes = self.flow.cast_dtype(call)
            elif func.attr in ("from_pretrained", "from_config"):
                dtypes = self.flow.dtype_of(keyword(call, "torch_dtype") or keyword(call, "dtype"))
            if not dtypes or not dtypes & HALF:
                continue
            outer = self._module_chain_end(call)  # `model = Net().half().cuda().eval()`
            parent = self.src.parents.get(outer)
            name = None
            if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and parent.value is outer:
                name = dotted(parent.targets[0])
            elif isinstance(parent, ast.Expr) and func.attr != "from_pretrained":
                name = dotted(func.value)
            out.append(ModelCast(call, dtypes & HALF, name, self._local_class(func.value)))
        for cast in out:
            if cast.name and "." not in cast.name:
                self.flow.half_models.setdefault(cast.name, (cast.dtypes, cast.node.lineno))
        return out

    def _module_chain_end(self, call: ast.Call) -> ast.Call:
        """The last call of a chain of module methods that return the module (`_MODULE_METHODS`) after `call`."""
        while isinstance(parent := self.src.parents.get(call), ast.Attribute) and parent.attr in _MODULE_METHODS \
                and isinstance(above := self.src.parents.get(parent), ast.Call) and above.func is parent:
            call = above
        return call

    @functools.cached_property
    def fp32_head(self) -> ast.Call | None:
        """An output head re-cast to fp32 after the model was cast to half (``model.lm_head.float()``,
        ``self.classifier.to(torch.float32)``): the logits, and the loss computed from them, are fp32."""
        if not self.model_casts:
            return None
        for call in self.src.calls:
            func = call.func
            if not isinstance(func, ast.Attribute) or func.attr not in ("float", "to", "double"):
                continue
            words = tokens(last_identifier(func.value) or "")
            if words & _HEAD_WORDS and (self.flow.cast_dtype(call) or frozenset()) & {"fp32", "fp64"}:
                return call
        return None

    def _local_class(self, expr: ast.AST) -> str | None:
        """`GPT(cfg)`, or `model` after `model = GPT(cfg)`, where this file defines `class GPT` -> "GPT"."""
        found = self.class_of(expr)
        return found if found in {c.name for c in self.src.classes} else None

    def class_of(self, expr: ast.AST) -> str | None:
        """The class a module-valued expression was built by: `GPT(cfg)`, `model` after `model = GPT(cfg)`,
        `models.GPT(cfg).to(device)` -> "GPT" (a capitalised callee: a class, by Python's convention); the first
        of `classes_of`."""
        return next(iter(self.classes_of(expr)), None)

    def classes_of(self, expr: ast.AST, depth: int = 0) -> tuple[str, ...]:
        """Every class the expression may have been built by, in the order of its bindings before it: a script that
        builds one of several models into one name (``model = A(...)`` in one branch, ``B.from_pretrained(...)`` in
        another); a wrapper bound after (``model = DDP(model)``) holds something else."""
        while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in ("to", "cuda", "train"):
            expr = expr.func.value
        if isinstance(expr, ast.Call):
            func = expr.func
            if isinstance(func, ast.Attribute) and func.attr in ("from_pretrained", "from_config"):
                func = func.value  # `GPT.from_pretrained(...)` is built by GPT
            ident = last_identifier(func)
            return (ident,) if ident and ident[:1].isupper() else ()
        found: dict[str, None] = {}
        if isinstance(expr, ast.Name) and depth < 3:
            for line, value in self.src.bindings(expr, self.src.scope(expr)):
                if value is not None and line <= expr.lineno:
                    found.update(dict.fromkeys(self.classes_of(value, depth + 1)))
        return tuple(found)

    @functools.cached_property
    def local_half_model(self) -> ModelCast | None:
        """A cast of a model whose classes this file defines (nanoGPT-style single-file training), without
        autocast: its modules' activations, softmax and loss all run in the cast dtype."""
        if self.mixed_precision_on:
            return None
        return next((c for c in self.model_casts if c.local_class), None)

    @functools.cached_property
    def half_autocasts(self) -> tuple[ast.AST, ...]:
        """Every place autocast is entered with an explicit half dtype, with a dtype the run chooses
        (``dtype=cfg.autocast_precision``) or with none (fp16 on CUDA, bf16 on the CPU): autocast computes in fp16 or
        bf16 whenever it is on, so the code runs in one of them; or a framework configured for half mixed precision
        (`AUTOCASTING_FRAMEWORKS`, or a callee the imports do not name)."""
        return tuple(node for node in self.mixed_precision if isinstance(node, ast.Call) and self._enters_half(node))

    @property
    def half_autocast(self) -> ast.AST | None:
        """The first of `half_autocasts`: the file runs some of its code under half autocast."""
        return self.half_autocasts[0] if self.half_autocasts else None

    def autocast_dtypes(self, node: ast.AST) -> frozenset[str]:
        """The half dtypes an autocast call of `half_autocasts` says it computes in; empty where it does not say
        (no ``dtype=``: fp16 on CUDA, bf16 on the CPU) or is a framework's setting."""
        name = self.src.imports.qualname(node.func) if isinstance(node, ast.Call) else None
        if name not in AUTOCASTS:
            return frozenset()
        return frozenset(self.flow.dtype_of(autocast_argument(node, name, "dtype")) or ()) & HALF

    def _enters_half(self, node: ast.Call) -> bool:
        name = self.src.imports.qualname(node.func)
        if name == "functools.partial" and node.args:  # an autocast factory (`_autocast_partial`): judged by the call it makes
            node = _made_call(node)
            name = self.src.imports.qualname(node.func)
        if name in AUTOCASTS:
            dtypes = self.flow.dtype_of(autocast_argument(node, name, "dtype"))
            if dtypes and dtypes & HALF:
                return True
            # `autocast(**saved_kwargs)` or `autocast(*saved_args)` restores a state recorded elsewhere (a
            # recompute, a traced region replayed), which may be off
            return not dtypes and not any(kw.arg is None for kw in node.keywords) \
                and not any(isinstance(a, ast.Starred) for a in node.args)
        if name is None:
            return not (isinstance(node.func, ast.Attribute) and node.func.attr == "autocast")
        return name.partition(".")[0] in AUTOCASTING_FRAMEWORKS and not hands_to_deepspeed(node)

    def half_autocast_reaching(self, nodes: list[ast.AST]) -> ast.AST | None:
        """The first of `half_autocasts` under which one of `nodes` runs, as far as this file shows: a ``with`` block
        or a decorated function around it, or one whose code calls, through the file's own functions and methods
        (by name; a call of anything else may be a module's, so it reaches every ``forward``), the function it sits
        in. An autocast whose extent the file does not bound (a framework set up for mixed precision, a context
        entered by hand) reaches all of it."""
        defs = self._reached_defs
        for autocast in self.half_autocasts:
            region = _autocast_region(autocast, self.src)
            if region is None:
                return autocast
            reached = defs(region)
            for node in nodes:
                if any(a is region or a in reached for a in self.src.ancestors(node)):
                    return autocast
        return None

    def _reached_defs(self, region: ast.AST) -> set[ast.AST]:
        """The functions and methods of this file that code in `region` may call (`half_autocast_reaching`); found
        once per region, however many places ask."""
        if region in self._reach_cache:
            return self._reach_cache[region]
        reached: set[ast.AST] = self._reach_cache.setdefault(region, set())
        todo = [region]
        while todo:
            for node in ast.walk(todo.pop()):
                for fn in self._callees(node):
                    if fn not in reached:
                        reached.add(fn)
                        todo.append(fn)
        return reached

    def _callees(self, node: ast.AST) -> list[ast.AST]:
        """The functions of this file `node` may run: those it names (called, or handed on as a callback), the
        methods of a class it names, those a method call of the same name may be; for a call of anything the imports
        do not name (a module, a bound method), every ``forward`` and ``__call__``."""
        by_name, classes, modules = self._definitions
        if isinstance(node, ast.Name):
            return by_name.get(node.id) or classes.get(node.id, [])
        if isinstance(node, ast.Attribute):
            return by_name.get(node.attr, [])
        if isinstance(node, ast.Call) and self.src.imports.qualname(node.func) is None:
            return modules
        return []

    @functools.cached_property
    def _definitions(self) -> tuple[dict[str, list[ast.AST]], dict[str, list[ast.AST]], list[ast.AST]]:
        """This file's functions and methods by name, each class's methods by its name, and the methods that calling
        a module runs (``forward``, ``__call__``)."""
        by_name: dict[str, list[ast.AST]] = {}
        for fn in self.src.functions:
            if not isinstance(fn, ast.Lambda):
                by_name.setdefault(fn.name, []).append(fn)
        defs = (ast.FunctionDef, ast.AsyncFunctionDef)
        classes = {cls.name: [fn for fn in cls.body if isinstance(fn, defs)] for cls in self.src.classes}
        modules = [fn for methods in classes.values() for fn in methods if fn.name in ("forward", "__call__")]
        return by_name, classes, modules

    @functools.cached_property
    def bf16_evidence(self) -> ast.AST | None:
        """The first sign that this file trains or runs in bf16, if any."""
        return next(self.bf16_places(), None)

    @functools.cached_property
    def bf16_run_evidence(self) -> ast.AST | None:
        """The first sign of `bf16_places` that says which precision the file runs in: not one that handles what a
        caller passes (``elif dtype == torch.bfloat16: model.bfloat16()`` in a helper given the dtype), one in a
        branch no run completes, nor a dtype table's entry no run picks (`_says_nothing`)."""
        return next((e for e in self.bf16_places() if not self._says_nothing(e)), None)

    def bf16_places(self) -> Iterator[ast.AST]:
        """Every sign that this file trains or runs in bf16, strongest kinds first."""
        for attr in self.src.attributes:
            if attr.attr == "bfloat16" and (self.src.imports.qualname(attr) == "torch.bfloat16" or isinstance(self.src.parents.get(attr), ast.Call)):
                yield attr
        for const in self.src.strings:
            if STRING_DTYPES.get(const.value.lower()) == BF16:
                yield const
        yield from self._bf16_flags()

    def _bf16_flags(self) -> Iterator[ast.AST]:
        for call in self.src.calls:
            if any(kw.arg == "bf16" and isinstance(kw.value, ast.Constant) and kw.value.value is True for kw in call.keywords):
                yield call
        for attr in self.src.attributes:
            # a run flag read by the code (``if args.bf16:``, ``self.use_bf16``): the code runs in bf16 when it is on
            if isinstance(attr.ctx, ast.Load) and tokens(attr.attr) & {"bf16", "bfloat16"} and attr.attr != "bfloat16":
                yield attr
        for call, name in self.autocast_calls:
            if self.autocast_device(call) == "cpu" and autocast_argument(call, name, "dtype") is None:
                yield call  # CPU autocast defaults to bf16

    def autocast_device(self, node: ast.AST) -> str | None:
        """The device an autocast call enters autocast on, where the call says it with a literal ("cpu" for
        ``torch.cpu.amp.autocast(...)`` and ``torch.autocast("cpu")``); None for anything else (a framework's mixed
        precision, a device the run chooses)."""
        name = self.src.imports.qualname(node.func) if isinstance(node, ast.Call) else None
        if name not in AUTOCASTS:
            return None
        if name != "torch.autocast":
            return name.split(".")[1]  # torch.cuda.amp.autocast, torch.cpu.amp.autocast
        device = autocast_argument(node, name, "device_type")
        return device.value if isinstance(device, ast.Constant) and isinstance(device.value, str) else None

    @functools.cached_property
    def autocast_disabled(self) -> list[ast.Call]:
        """Calls that turn autocast off: a file that guards code against autocast is meant to run under it."""
        return [call for call in self.src.calls if disables_autocast(call, self.src)]

    def autocast_off_at(self, node: ast.AST) -> bool:
        """Does `node` run with autocast off: inside ``with <disabling call>:`` or a function decorated with one,
        in its own function (a nested ``def`` does not inherit the block it is defined in)."""
        if not self.autocast_disabled:
            return False
        for parent, child in self.src.steps(node):
            if isinstance(parent, (ast.With, ast.AsyncWith)) and child in parent.body and any(
                    isinstance(i.context_expr, ast.Call) and disables_autocast(i.context_expr, self.src) for i in parent.items):
                return True
            if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return any(isinstance(d, ast.Call) and disables_autocast(d, self.src) for d in parent.decorator_list)
            if isinstance(parent, ast.Lambda):
                return False
        return False

    def expects_error(self, node: ast.AST) -> bool:
        """Does `node` sit in a block written to raise (``with pytest.raises(...)``, ``with self.assertRaises(...)``,
        in its own function): a test that checks the failure happens, not code that fails by mistake."""
        for parent, child in self.src.steps(node):
            if isinstance(parent, (ast.With, ast.AsyncWith)) and child in parent.body and any(
                    isinstance(i.context_expr, ast.Call) and _raises_context(i.context_expr, self.src) for i in parent.items):
                return True
            if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                return False
        return False

    def half_evidence(self, near: ast.AST | None = None) -> ast.AST | None:
        """The first sign that this file runs in bf16 or fp16: `bf16_evidence`, a model cast to half, or an fp16
        dtype (``torch.float16``, ``.half()``, ``"fp16"``). With `near` (a class or function), a parameter's default
        of another function or class is passed over: it is what that code is built in when its caller says nothing
        (``def __init__(self, dim, dtype=torch.half)``), which says nothing of what runs through `near`."""
        casts = {id(c.node) for c in self.model_casts}  # a cast is a sign whatever surrounds it, where a run gets
        return next((e for e in self.half_places()
                     if (not self._says_nothing(e) or id(e) in casts and self.flow.never_taken(e) is None)
                     and (near is None or not self._default_elsewhere(e, near))), None)

    def _default_elsewhere(self, node: ast.AST, near: ast.AST) -> bool:
        """Is `node` (in) a parameter's default of a function that `near` neither is nor contains nor sits in?"""
        for parent, child in self.src.steps(node):
            if isinstance(parent, ast.arguments):
                fn = self.src.parents.get(parent)
                return not (fn is near or any(a is near for a, _ in self.src.steps(fn)) or any(a is fn for a, _ in self.src.steps(near)))
            if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.stmt)):
                return False
        return False

    def half_places(self) -> Iterator[ast.AST]:
        """Every place this file names a half dtype or casts to one, whatever it does with it, strongest kinds first:
        bf16's, a model cast to half, fp16's."""
        yield from self.bf16_places()
        yield from (c.node for c in self.model_casts)
        yield from self._fp16_dtypes()

    def _says_nothing(self, node: ast.AST) -> bool:
        """A half dtype that says nothing of the precision the file runs in: one that handles what a caller passes
        (`_handles_dtype`), one in a branch no run completes (`_in_broken_branch`), one the file's own values decide
        (`_decided_here`), an entry of a dtype table no run picks (`_unpicked_entry`), or a name no code maps to a
        dtype (`_never_read`)."""
        return self._handles_dtype(node) or self._in_broken_branch(node) or self._decided_here(node) or self._unpicked_entry(node) \
            or self._never_read(node)

    def _never_read(self, node: ast.AST) -> bool:
        """A dtype named in a type annotation (``gemm_impl: Literal["bf16", "fp8"]``: the values a name may take, not one
        a run takes), or a dtype's name written as a string and bound to a name that nothing reads, in a module that
        trains nothing (``gemm_impl = "bf16"`` kept from the model file it was copied from, without the code that read
        it): a string is a dtype only through code that maps it to one. In a file that trains, an unread setting is
        still what its run asks for (a ``dtype = "bfloat16"`` never passed to autocast is the bug itself); a class
        attribute is read through its instances; a file that may read names its text does not show (a star import,
        ``exec``, ``globals()``) or that writes the name in a string (``__all__``, ``getattr``) keeps it."""
        for parent, child in self.src.steps(node):
            if isinstance(parent, (ast.AnnAssign, ast.arg)) and child is parent.annotation \
                    or isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) and child is parent.returns:
                return True
            if isinstance(parent, (ast.stmt, ast.arguments)):
                break
        binding = self.src.parents.get(node)
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and isinstance(binding, (ast.Assign, ast.AnnAssign)) and binding.value is node):
            return False
        targets = binding.targets if isinstance(binding, ast.Assign) else [binding.target]
        if not all(isinstance(t, ast.Name) for t in targets) or isinstance(self.src.parents.get(binding), ast.ClassDef):
            return False
        unseen, read = self._names_read
        return not unseen and not any(t.id in read for t in targets) and not trains_anywhere(self.src.text)  # type: ignore[attr-defined]

    @functools.cached_property
    def _names_read(self) -> tuple[bool, frozenset[str]]:
        """(whether the file may read names its text does not show, the names it reads: loaded, declared ``global`` or
        ``nonlocal``, or written as a string)."""
        unseen = self.src.rebinds_unseen or any(isinstance(c.func, ast.Name) and c.func.id in _READS_UNSEEN for c in self.src.calls)
        nodes = self.src.parents  # every node of the tree but the module itself: no walk of it
        read = {n.id for n in nodes if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Store)}
        read |= {name for n in nodes if isinstance(n, (ast.Global, ast.Nonlocal)) for name in n.names}
        read |= {c.value for c in self.src.strings}
        return unseen, frozenset(read)

    def _decided_here(self, node: ast.AST) -> bool:
        """A dtype in a branch no run takes (`Dataflow.never_taken`), or compared in a test the file's own values
        decide (``dtype == torch.bfloat16`` with ``dtype = torch.float16``): where the run's dtype is bf16, its own
        binding says so."""
        test = self.src.parents.get(node)
        return self.flow.never_taken(node) is not None or \
            isinstance(test, ast.Compare) and self.flow.decided(test, self.src.scope(test)) is not None

    def _unpicked_entry(self, node: ast.AST) -> bool:
        """A key or entry of a dtype table looked up in place by a key that no run of the file holds
        (``{"float16": torch.float16, "bfloat16": torch.bfloat16}[dtype]`` with ``dtype = "float16"``): the table is
        the menu a run picks from, and the run picks another entry."""
        table = self.src.parents.get(node)
        lookup = self.src.parents.get(table) if isinstance(table, ast.Dict) else None
        if not (isinstance(lookup, ast.Subscript) and lookup.value is table):
            return False
        if node in table.keys:
            named = STRING_DTYPES.get(node.value.lower()) if isinstance(node, ast.Constant) and isinstance(node.value, str) else None
        else:
            named = self.flow.dtype_of(node)
        if not named or self.src.rebinds_unseen or (not self.runs and self._reads_option(lookup.slice)):
            return False  # a command line may pick the entry: the configurator's `exec`, or an option of the script
        runs = self.dtypes_per_run(lookup)
        return runs is not None and not any(named & dtypes for _, dtypes in runs)

    def _reads_option(self, expr: ast.AST) -> bool:
        """Does `expr` read an option of the file's command line (``args.dtype``)?"""
        return any(isinstance(n, ast.Attribute) and n.attr in self._defaults for n in ast.walk(expr))

    def _in_broken_branch(self, node: ast.AST) -> bool:
        """Is `node` in a branch of an ``if`` that raises NameError whenever it runs: one of the branch's simple
        statements calls a name the file neither defines, imports nor gets from builtins (an import commented out,
        ``# from .flash import FlashAttention``). The dtype there is never used by a run that works."""
        for parent, child in self.src.steps(node):
            if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.Try)):
                return False
            if isinstance(parent, ast.If) and child is not parent.test:
                undefined = self._undefined_names  # the file's names read once, only for a dtype in a branch
                if not undefined:
                    return False
                branch = parent.body if child in parent.body else parent.orelse
                return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in undefined
                           for stmt in branch if not isinstance(stmt, _COMPOUND) for n in _run_now(stmt))
        return False

    @functools.cached_property
    def _undefined_names(self) -> frozenset[str]:
        """Names the file calls and binds nowhere (no assignment, parameter, def, class, import or loop target of
        that name anywhere in it) and builtins lack; none where a star import or ``globals()``/``exec`` may bind
        names the text does not show."""
        if self.src.rebinds_unseen:
            return frozenset()
        called = {c.func.id for c in self.src.calls if isinstance(c.func, ast.Name)} - _BUILTIN_NAMES
        if not called:
            return frozenset()
        # every node but the module and the shared leaves (contexts, operators), which bind nothing
        bound = {name for node in self.src.parents for name in _bound_by(node)}
        return frozenset(called - bound)

    def _handles_dtype(self, node: ast.AST, depth: int = 0) -> bool:
        """Is a half dtype named here only to handle what the caller passes: a dtype test
        (``half_input = x.dtype == torch.float16``) or a cast made only when such a test held
        (``if half_input: ret = ret.half()``, restoring the input's dtype), also inside a module-level function that
        the file calls only where such a test held. Such code runs in whatever precision it is given and says nothing
        of which that is."""
        for parent, child in self.src.steps(node):
            if isinstance(parent, ast.Compare) and self._dtype_test(parent):
                return True
            if isinstance(parent, ast.If) and child is not parent.test and self._dtype_test(parent.test):
                return True
            if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) and self.src.parents.get(parent) is self.src.tree:
                # a module-level helper (``random_cast_to_half(x)``) that the file calls only where such a test held
                calls = self.src.calls_of(parent.name)
                return bool(calls) and depth < 2 and all(self._handles_dtype(c, depth + 1) for c in calls)
            if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                return False
        return False

    def _dtype_test(self, test: ast.AST) -> bool:
        """``x.dtype == torch.float16``, ``dtype in (...)`` on a dtype the function is given, a name bound to such a
        comparison before, a query of the autocast state, or a conjunction or disjunction of these."""
        if isinstance(test, ast.Name):
            scope = self.src.scope(test)
            before = [v for line, v in self.src.bindings(test, scope) if line < test.lineno and v is not None]
            return bool(before) and self._dtype_test(before[-1])
        if _autocast_state(test):
            # ``if torch.is_autocast_enabled(): y = y.to(torch.float16)``: the cast follows the autocast state its
            # caller runs under, and says no more of the run's precision than a test of the input's dtype does
            return True
        if isinstance(test, ast.BoolOp):
            return all(self._dtype_test(v) for v in test.values)
        if not isinstance(test, ast.Compare):
            return False
        sides = (test.left, *test.comparators)
        # `cfg.dtype == "bf16"` compares a configured name: it chooses the file's precision, not handles a tensor's.
        if any(_strings(side) for side in sides):
            return False
        return any(isinstance(side, ast.Attribute) and side.attr == "dtype" or self._dtype_parameter(side) for side in sides)

    def _dtype_parameter(self, node: ast.AST) -> bool:
        """A parameter of the enclosing function that holds a dtype (``def build_cache(n, dtype):``): testing it
        handles what the caller passes, as a test of ``x.dtype`` does."""
        return isinstance(node, ast.Name) and "dtype" in tokens(node.id) and self.src.is_parameter(node)

    @functools.cached_property
    def bf16_dtype_named(self) -> bool:
        """The file names bf16 as a dtype (``torch.bfloat16``, ``"bf16"``), not only as a switch."""
        return any(isinstance(e, ast.Constant) or isinstance(e, ast.Attribute) and e.attr == "bfloat16" for e in self.bf16_places())

    @functools.cached_property
    def never_fp16(self) -> bool:
        """Nothing in the file says fp16 (`fp16_places`) or reads a bf16 switch (``args.bf16``: off, the run gets
        another dtype): whatever half precision it sets up is bf16."""
        switch = any(isinstance(e, ast.Attribute) and e.attr != "bfloat16" for e in self.bf16_places())
        return not switch and next(self.fp16_places(), None) is None

    def fp16_places(self) -> Iterator[ast.AST]:
        """Every sign that this file may train or run in fp16: an fp16 dtype, a `.half()` cast, a string naming fp16,
        a run flag (``args.fp16``, ``fp16=True``). None of them: what precision the file sets up is never fp16."""
        yield from self._fp16_dtypes()
        for call in self.src.calls:
            for kw in call.keywords:
                if kw.arg == "fp16" and not (isinstance(kw.value, ast.Constant) and not kw.value.value):
                    yield call
                if kw.arg == "precision" and isinstance(kw.value, ast.Constant) and str(kw.value.value).startswith("16"):
                    yield call  # Lightning's `precision=16`
        for node in ast.walk(self.src.tree):  # a flag read anywhere: ``args.fp16``, ``if use_half:``
            name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
            if name and tokens(name) & _FP16_WORDS:
                yield node

    @functools.cached_property
    def fp16_possible(self) -> bool:
        """This file's code may run in fp16: it names an fp16 dtype (not only to handle what a caller passes), or it
        enters autocast without a dtype (fp16 on CUDA)."""
        if any(not self._says_nothing(e) for e in self._fp16_dtypes()):
            return True
        return any(autocast_argument(call, name, "dtype") is None and not disables_autocast(call, self.src)
                   for call, name in self.autocast_calls)

    def _fp16_dtypes(self) -> Iterator[ast.AST]:
        for attr in self.src.attributes:
            if attr.attr in ("float16", "half") and self.src.imports.qualname(attr) in ("torch.float16", "torch.half"):
                yield attr
            if attr.attr == "half" and isinstance(self.src.parents.get(attr), ast.Call):
                yield attr
        for const in self.src.strings:
            if not const.value.isdigit() and STRING_DTYPES.get(const.value.lower()) == FP16:
                yield const

    @functools.cached_property
    def tf32_matmuls(self) -> ast.AST | None:
        """Where fp32 matmuls are allowed to run in TF32 (`set_float32_matmul_precision("high")`, `allow_tf32 = True`)."""
        for call in self.src.calls:
            name = self.src.imports.qualname(call.func) or ""
            if name.endswith("set_float32_matmul_precision") and call.args:
                arg = call.args[0]
                if isinstance(arg, ast.Constant) and arg.value in ("high", "medium"):
                    return call
        for node in self.src.assigns:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value is True:
                for target in node.targets:
                    name = self.src.imports.qualname(target) or ""
                    if name in ("torch.backends.cuda.matmul.allow_tf32",):
                        return node
        return None


def _autocast_region(autocast: ast.AST, src: SourceFile) -> ast.AST | None:
    """The code an autocast call covers: the ``with`` statement it is an item of, or the function it decorates; None
    where it is entered otherwise (a framework's setting, a context kept in a name), whose extent lint does not bound."""
    parent = src.parents.get(autocast)
    if isinstance(parent, ast.withitem) and parent.context_expr is autocast:
        return src.parents.get(parent)
    if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) and autocast in parent.decorator_list:
        return parent
    return None


def _run_now(stmt: ast.stmt) -> Iterator[ast.AST]:
    """The nodes of a simple statement that run when it does: not the body of a lambda or comprehension in it."""
    todo: list[ast.AST] = [stmt]
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.Lambda, ast.GeneratorExp, ast.ListComp, ast.SetComp, ast.DictComp)):
            todo.extend(ast.iter_child_nodes(node))


def _bound_by(node: ast.AST) -> tuple[str, ...]:
    """The names one node binds: a stored name, a def or class, a parameter, an import, a global or nonlocal
    declaration, an ``except ... as`` or a ``match`` capture."""
    if isinstance(node, ast.Name):
        return () if isinstance(node.ctx, ast.Load) else (node.id,)
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return (node.name,)
    if isinstance(node, ast.arg):
        return (node.arg,)
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return tuple((a.asname or a.name).split(".")[0] for a in node.names)
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return tuple(node.names)
    if isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
        return (node.name,)
    return ()


def _autocast_state(node: ast.AST) -> bool:
    """A query of the autocast state: ``torch.is_autocast_enabled()``, ``torch.is_autocast_cpu_enabled()``."""
    return isinstance(node, ast.Call) and (last_identifier(node.func) or "").startswith("is_autocast")


def _strings(node: ast.AST) -> bool:
    """A string constant, or a tuple, list or set of them."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return bool(node.elts) and all(_strings(e) for e in node.elts)
    return isinstance(node, ast.Constant) and isinstance(node.value, str)
