"""Training configs written in Python, read by the same framework readers that read config files.

``TrainingArguments(fp16=True, bf16=True)``, ``Accelerator(mixed_precision="fp16")``, ``Trainer(precision=...)``, a
DeepSpeed dict handed to ``deepspeed.initialize``, FSDP's ``MixedPrecision(...)``, a ``@dataclass`` of training
arguments whose fields default to precision flags: each becomes a `Document` (syntax "python", the values as plain
data, each key located at its keyword in the .py file) and goes to the framework's own `Reader`, so the rules judge
it exactly as they judge the YAML or JSON spelling of the same values.

A value is what the code says for certain: a literal, or a name or attribute whose every assignment is one literal.
Anything else is unknown and never assumed: a finding is reported only when it holds for every value an unknown
key could take (`DOMAINS`), so ``TrainingArguments(fp16=True, bf16=args.bf16)`` says nothing about both being on.
"""

from __future__ import annotations

import ast
import itertools
import re
from dataclasses import dataclass, replace
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from ampdoctor.core.engine import check_policy
from ampdoctor.core.model import Finding, Location
from ampdoctor.dtypes import HALF
from ampdoctor.frameworks import accelerate, deepspeed, fsdp, hf, lightning, reader_for, reader_named
from ampdoctor.frameworks.base import Reading
from ampdoctor.frameworks.document import Document, KeyPath, OwnSaid
from ampdoctor.frameworks.reader import READ_ERRORS, Reader
from ampdoctor.lint.python.literal import UNKNOWN, Values
from ampdoctor.lint.python.resolve import is_dataclass, last_identifier
from ampdoctor.lint.python.source import parameters

if TYPE_CHECKING:
    from ampdoctor.lint.python.context import Context
    from ampdoctor.lint.python.words import TextWords

_ABSENT: Any = object()  # in a domain: the key left out

# A file can hold a Python config only if it names a constructor that takes one (or declares a precision field) and a
# precision. The constructor words are the rarer: they are looked for first. Each word costs a scan of every file that holds none of them (most): the list is kept short ("16:" is "bf16:" and "fp16:").
CONSTRUCTOR_WORDS = ("TrainingArguments", "Trainer(", "Accelerator(", "Fabric(", "deepspeed", "MixedPrecision", "trl", "16:", "precision:")
PRECISION_WORDS = ("bf16", "fp16", "bfloat16", "float16", "precision", "half")
# The last identifier of the callees `_reader_of_call` knows: calls named otherwise are not resolved at all.
_CALLEE_NAMES = frozenset({"TrainingArguments", "Seq2SeqTrainingArguments", "Accelerator", "Trainer", "Fabric", "initialize",
                           "MixedPrecision", "MixedPrecisionPolicy"})

HF_CLASSES = frozenset({"transformers.TrainingArguments", "transformers.Seq2SeqTrainingArguments",
                        "transformers.training_args.TrainingArguments", "transformers.training_args_seq2seq.Seq2SeqTrainingArguments"})
# TRL's trainer configs subclass TrainingArguments; its model-loading and script dataclasses do not.
_TRL_NOT_TRAINING = frozenset({"ModelConfig", "ScriptArguments", "GenerationConfig"})
ACCELERATE_CLASSES = frozenset({"accelerate.Accelerator", "accelerate.accelerator.Accelerator"})
LIGHTNING_CLASSES = frozenset({"lightning.Trainer", "lightning.pytorch.Trainer", "pytorch_lightning.Trainer",
                               "lightning.pytorch.trainer.trainer.Trainer", "pytorch_lightning.trainer.trainer.Trainer",
                               "lightning.Fabric", "lightning.fabric.Fabric", "lightning_fabric.Fabric", "lightning.fabric.fabric.Fabric"})
LIGHTNING_KEYS = ("precision", "strategy", "devices", "num_nodes", "accumulate_grad_batches")
DEEPSPEED_CALLS = frozenset({"deepspeed.initialize"})
FSDP_CLASSES = frozenset({"torch.distributed.fsdp.MixedPrecision", "torch.distributed.fsdp.MixedPrecisionPolicy"})
_HF_ONLY_FIELDS = frozenset({"per_device_train_batch_size", "output_dir", "deepspeed", "bf16_full_eval", "half_precision_backend"})
FSDP_KEYS = ("param_dtype", "reduce_dtype", "buffer_dtype", "output_dtype")

# The values an unknown key could take, by key name: a finding must hold for each (keys not named here are left out).
DOMAINS: dict[str, tuple[Any, ...]] = {
    **dict.fromkeys(("bf16", "fp16", "tf32", "bf16_full_eval", "fp16_full_eval", "enabled", "use_peft"), (True, False)),
    "mixed_precision": ("no", "fp16", "bf16"),
    "precision": ("32-true", "16-mixed", "bf16-mixed", "16-true", "bf16-true"),
    **dict.fromkeys(("gradient_accumulation_steps", "accumulate_grad_batches"), (1, 8)),
    **dict.fromkeys(("torch_dtype", "dtype", *FSDP_KEYS, "grad_accum_dtype", "communication_data_type"), ("fp32", "bf16", "fp16")),
    "stage": (0, 1, 2, 3),
    "deepspeed": (_ABSENT, "deepspeed_config.json"),
    "strategy": ("auto", "ddp", "fsdp", "deepspeed"),
}
MAX_VARIANTS = 64


@dataclass(frozen=True)
class EmbeddedConfig:
    """One config written in Python: the document its framework's reader reads, the reader, the keys whose values the
    code does not fix (by key path, where written), and the call or class that holds it."""

    document: Document
    reader: Reader
    unknown: dict[KeyPath, Location]
    node: ast.AST
    what: str  # "TrainingArguments(...)", "@dataclass TrainArgs"


def applies(text: "str | TextWords") -> bool:
    return any(w in text for w in CONSTRUCTOR_WORDS) and any(w in text for w in PRECISION_WORDS)


# --- values ------------------------------------------------------------------------------------------


# --- where configs are written ----------------------------------------------------------------------------


def _is_test_file(path: str) -> bool:
    """A test module by its name (test functions elsewhere are recognised by theirs, in `_not_run`)."""
    name = PurePath(path).name
    return name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"


def _not_run(ctx: Context, node: ast.AST) -> bool:
    """Code that does not configure a run: under ``if TYPE_CHECKING:`` or ``if False:``, in a block written to raise,
    in a test function."""
    for parent, child in ctx.src.steps(node):
        if isinstance(parent, ast.If) and child in parent.body and (
                ctx.qualname(parent.test) == "typing.TYPE_CHECKING" or (isinstance(parent.test, ast.Name) and parent.test.id == "TYPE_CHECKING")
                or (isinstance(parent.test, ast.Constant) and not parent.test.value)):
            return True
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) and parent.name.startswith("test"):
            return True
    return ctx.facts.expects_error(node)


def _reader_of_call(ctx: Context, call: ast.Call, local_hf: frozenset[str]) -> tuple[Reader, str] | None:
    func = call.func
    last = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if last not in _CALLEE_NAMES and last not in local_hf and not last.endswith("Config"):
        return None
    name = ctx.qualname(func)
    if name is None:
        local = call.func.id if isinstance(call.func, ast.Name) else None
        return (hf.READER, local) if local in local_hf else None
    short = name.rsplit(".", 1)[-1]
    if name in HF_CLASSES or (name.startswith("trl.") and short.endswith("Config") and short not in _TRL_NOT_TRAINING):
        return hf.READER, short
    if name in ACCELERATE_CLASSES:
        return accelerate.READER, short
    if name in LIGHTNING_CLASSES:
        return lightning.READER, short
    if name in DEEPSPEED_CALLS:
        return deepspeed.READER, name
    if name in FSDP_CLASSES:
        return fsdp.READER, short
    return None


def _call_config(ctx: Context, call: ast.Call, reader: Reader, what: str) -> EmbeddedConfig | None:
    scope = ctx.src.scope(call)
    values = Values(ctx, ctx.src.path)
    if reader is deepspeed.READER:
        given = next((kw.value for kw in call.keywords if kw.arg in ("config", "config_params")), None)
        data = values.mapping_named(given, (), scope) if given is not None else UNKNOWN
    else:
        data = values.mapping(ast.Call(func=ast.Name(id="dict"), args=[], keywords=call.keywords), (), scope, 0)
        if reader is lightning.READER and isinstance(data, dict):
            data = _lightning_document(ctx, call, data, values)
        elif reader is accelerate.READER and isinstance(data, dict):
            data = _accelerate_document(ctx, call, data, values)
            # Left out, the precision is the launcher's (`accelerate launch`, ACCELERATE_MIXED_PRECISION), not "no".
            data.setdefault("mixed_precision", UNKNOWN)
    if not isinstance(data, dict) or not data:
        return None
    return _embedded(data, values, reader, call, f"{what}(...)")


def _lightning_document(ctx: Context, call: ast.Call, data: dict, values: Values) -> dict:
    """Lightning's keywords as its YAML spells them (under ``trainer:``); a strategy object as ``class_path``/``init_args``."""
    trainer = {k: v for k, v in data.items() if k in LIGHTNING_KEYS}
    strategy = next((kw.value for kw in call.keywords if kw.arg == "strategy"), None)
    if isinstance(strategy, ast.Call):
        name = ctx.qualname(strategy.func) or last_identifier(strategy.func) or ""
        init = values.mapping(ast.Call(func=ast.Name(id="dict"), args=[], keywords=strategy.keywords), ("trainer", "strategy", "init_args"),
                              ctx.src.scope(call), 0)
        trainer["strategy"] = {"class_path": name, "init_args": init if isinstance(init, dict) else {}}
    values.locations = {("trainer", *path): loc for path, loc in values.locations.items() if path[:1] != ("trainer",)} | {
        path: loc for path, loc in values.locations.items() if path[:1] == ("trainer",)}
    return {"trainer": trainer}


def _accelerate_document(ctx: Context, call: ast.Call, data: dict, values: Values) -> dict:
    """``Accelerator(deepspeed_plugin=DeepSpeedPlugin(...))`` as accelerate's config file spells it (``distributed_type:
    DEEPSPEED`` and a ``deepspeed_config`` section holding the plugin's keywords)."""
    plugin = next((kw.value for kw in call.keywords if kw.arg == "deepspeed_plugin"), None)
    if not (isinstance(plugin, ast.Call) and (ctx.qualname(plugin.func) or "").endswith("DeepSpeedPlugin")):
        return data
    section = values.mapping(ast.Call(func=ast.Name(id="dict"), args=[], keywords=plugin.keywords), ("deepspeed_config",), ctx.src.scope(call), 0)
    if isinstance(section, dict) and section.get("hf_ds_config") is UNKNOWN:
        given = next((kw.value for kw in plugin.keywords if kw.arg == "hf_ds_config"), None)
        if given is not None:
            section["hf_ds_config"] = values.mapping_named(given, ("deepspeed_config", "hf_ds_config"), ctx.src.scope(call))
    values.locations[("distributed_type",)] = values.at(plugin)
    data.pop("deepspeed_plugin", None)
    return {**data, "distributed_type": "DEEPSPEED", "deepspeed_config": section}


def _embedded(data: dict, values: Values, reader: Reader, node: ast.AST, what: str) -> EmbeddedConfig | None:
    """The config, or None when the code fixes none of its values."""
    unknown: dict[KeyPath, Location] = {}
    _strip_unknown(data, (), values.locations, unknown, values.at(node))
    if not data or data == {"trainer": {}}:
        return None
    doc = Document(values.file, "python", data, dict(values.locations))
    return EmbeddedConfig(doc, reader, unknown, node, what)


def _strip_unknown(node: Any, path: KeyPath, locations: dict, unknown: dict, default: Location) -> None:
    """Unknown values are left out of the data and listed (by key path) instead."""
    if not isinstance(node, dict):
        return
    for key in list(node):
        if node[key] is UNKNOWN:
            del node[key]
            unknown[(*path, key)] = locations.get((*path, key), default)
        else:
            _strip_unknown(node[key], (*path, key), locations, unknown, default)
            if isinstance(node[key], list) and any(v is UNKNOWN for v in node[key]):
                node[key] = [v for v in node[key] if v is not UNKNOWN]


def _dataclass_configs(ctx: Context, local_hf: frozenset[str]) -> Iterator[EmbeddedConfig]:
    """Classes of training arguments whose fields default to precision values: a TrainingArguments subclass is read as
    HF arguments; a plain ``@dataclass`` as the framework whose config its field names are, if any."""
    for cls in ctx.src.classes:
        hf_based = any((ctx.qualname(b) or "") in HF_CLASSES or (isinstance(b, ast.Name) and b.id in local_hf) for b in cls.bases)
        if not hf_based and not is_dataclass(cls):
            continue
        if _not_run(ctx, cls):
            continue
        values = Values(ctx, ctx.src.path)
        data = _field_defaults(cls, values)
        # every field of a TrainingArguments subclass is one it adds: the project's own key (`own_argument_fields`)
        declared = frozenset(data) - {"deepspeed"} if hf_based else frozenset()
        reader = _reader_of_fields(ctx, data, hf_based)
        config = _embedded(data, values, reader, cls, f"class {cls.name}") if reader is not None else None
        if config is not None:
            yield replace(config, document=replace(config.document, own_keys=declared))


def _field_defaults(cls: ast.ClassDef, values: Values) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for stmt in cls.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            values.locations[(stmt.target.id,)] = values.at(stmt)
            data[stmt.target.id] = values.value(_field_default(stmt.value), (stmt.target.id,), cls)
    return data


def _reader_of_fields(ctx: Context, data: dict[str, Any], hf_based: bool) -> Reader | None:
    """HF for a TrainingArguments subclass; for a plain dataclass with a precision field, the reader that recognises its
    field names (HF only with a field no other trainer's options use: fairseq's have fp16 and bf16 too)."""
    if not any(k in data for k in ("bf16", "fp16", "mixed_precision", "precision")):
        return None
    if hf_based:
        return hf.READER
    reader = reader_for(Document(ctx.src.path, "python", {k: None for k in data}))
    if reader is hf.READER and _HF_ONLY_FIELDS & set(data):
        return reader
    return reader if reader is accelerate.READER and "mixed_precision" in data else None


def _field_default(value: ast.expr | None) -> ast.expr | None:
    """The default of a dataclass field: the value, or ``field(default=...)``'s (a default_factory is unknown)."""
    if isinstance(value, ast.Call) and last_identifier(value.func) == "field":
        return next((kw.value for kw in value.keywords if kw.arg == "default"), None)
    return value


_HF_BASE_NAMES = frozenset(q.rsplit(".", 1)[1] for q in HF_CLASSES)


def own_code(paths: Iterable[Path]) -> tuple[frozenset[str], OwnSaid]:
    """What the project's own Python (outside its tests) says of its training configs, each file read once: the fields
    its own subclasses of HF TrainingArguments add (`own_argument_fields`), where its own model-loading code
    defaults the load dtype to half (`_half_load_default`), and where it switches a DeepSpeed config's precision
    itself (`_switches_engine_precision`). Read before the configs are, so by name only."""
    said = _OwnCode()
    for path in paths:
        if not _is_test_file(str(path)):
            said.read(path)
    if said.initializes and said.declares_deepspeed:
        # The project hands its DeepSpeed config to `deepspeed.initialize` itself, from an option of its own: a config's
        # `deepspeed` key is that option, which the HF Trainer's checks see only if the project also passes it on.
        said.fields.add("deepspeed")
    return frozenset(said.fields), OwnSaid(said.default, said.switched)


class _OwnCode:
    """What `own_code` has read so far; a file is parsed only where its bytes hold what one of the readings looks for."""

    def __init__(self) -> None:
        self.fields: set[str] = set()
        self.default: str | None = None
        self.switched: str | None = None
        self.initializes = self.declares_deepspeed = False

    def read(self, path: Path) -> None:
        try:
            raw = path.read_bytes()
            arguments, loads = b"TrainingArguments" in raw, self.default is None and b"torch_dtype" in raw
            self.initializes = self.initializes or b"deepspeed.initialize(" in raw
            option = not self.declares_deepspeed and any(word in raw for word in _OWN_DEEPSPEED_WORDS)
            switches = self.switched is None and b"enabled" in raw and any(word in raw for word in _ENGINE_BLOCK_WORDS) \
                and _NAMES_DEEPSPEED.search(raw) is not None
            tree = ast.parse(raw) if arguments or loads or option or switches else None
        except (OSError, SyntaxError, ValueError, RecursionError):
            return
        if tree is not None:
            self._parsed(path, tree, arguments, loads, option, switches)

    def _parsed(self, path: Path, tree: ast.Module, arguments: bool, loads: bool, option: bool, switches: bool) -> None:
        if arguments:
            self.fields |= own_argument_fields(tree)
        self.declares_deepspeed = self.declares_deepspeed or (option and _declares_own_deepspeed_option(tree))
        line = _half_load_default(tree) if loads else None
        if line is not None:
            self.default = f"{path.name}:{line}"
        line = _switches_engine_precision(tree) if switches else None
        if line is not None:
            self.switched = f"{path.name}:{line}"


# What a file that switches a DeepSpeed config's precision block holds (only those are parsed for it): a block's name
# as a string, and a word for DeepSpeed or its config (a dict's own `"fp16"` block elsewhere, an export's or a
# logger's, says nothing of the project's DeepSpeed runs).
_ENGINE_BLOCK_WORDS = (b'"fp16"', b"'fp16'", b'"bf16"', b"'bf16'", b'"bfloat16"', b"'bfloat16'")
_NAMES_DEEPSPEED = re.compile(rb"(?i)deepspeed|\bds_?(?:config|cfg|conf)\b")
_ENGINE_BLOCKS = frozenset({"fp16", "bf16", "bfloat16"})


def _switches_engine_precision(tree: ast.Module) -> int | None:
    """The line where the code switches a DeepSpeed precision block of a config it holds as a dict:
    ``ds_config["bf16"]["enabled"] = args.bf16`` (or ``ds_config.setdefault("bf16", {})["enabled"] = ...``), the
    whole block replaced by one that says whether it is enabled (``ds["fp16"] = {"enabled": not bf16}``,
    ``dict(enabled=...)``), or updated so (``ds["bf16"].update(enabled=...)``, ``ds.update({"bf16": {...}})``).
    Keyword dicts of a launcher's arguments (``kwargs["fp16"] = ...``) write no block and do not count."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(_switched_block(t, node.value) for t in node.targets):
            return node.lineno
        if isinstance(node, ast.Call) and _updates_block(node):
            return node.lineno
    return None


def _switched_block(target: ast.expr, value: ast.expr) -> bool:
    if not isinstance(target, ast.Subscript):
        return False
    if _constant_key(target) == "enabled":
        return _engine_block(target.value)
    return _constant_key(target) in _ENGINE_BLOCKS and _says_enabled(value)


def _updates_block(call: ast.Call) -> bool:
    """``ds["bf16"].update(enabled=...)`` or ``ds.update({"bf16": {"enabled": ...}})``."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr == "update"):
        return False
    if _engine_block(func.value):
        return any(kw.arg == "enabled" for kw in call.keywords) or any(_says_enabled(a) for a in call.args)
    return any(isinstance(k, ast.Constant) and k.value in _ENGINE_BLOCKS and _says_enabled(v)
               for a in call.args if isinstance(a, ast.Dict) for k, v in zip(a.keys, a.values))


def _engine_block(expr: ast.expr) -> bool:
    """``cfg["bf16"]`` or ``cfg.setdefault("bf16", {})``: a DeepSpeed precision block of a dict."""
    if isinstance(expr, ast.Subscript):
        return _constant_key(expr) in _ENGINE_BLOCKS
    return isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "setdefault" \
        and bool(expr.args) and isinstance(expr.args[0], ast.Constant) and expr.args[0].value in _ENGINE_BLOCKS


def _says_enabled(value: ast.expr) -> bool:
    """``{"enabled": ...}`` or ``dict(enabled=...)``: a block that says whether it is on."""
    if isinstance(value, ast.Dict):
        return any(isinstance(k, ast.Constant) and k.value == "enabled" for k in value.keys)
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "dict" \
        and any(kw.arg == "enabled" for kw in value.keywords)


def _constant_key(target: ast.Subscript) -> object:
    return target.slice.value if isinstance(target.slice, ast.Constant) else None


# What a file that declares its own `deepspeed` option holds (only those are parsed for it).
_OWN_DEEPSPEED_WORDS = (b'"--deepspeed"', b"'--deepspeed'", b"deepspeed:", b"add_config_arguments")


def _declares_own_deepspeed_option(tree: ast.Module) -> bool:
    """A `deepspeed` option of the project's own: a field of an argument class that is no TrainingArguments (which has
    that field itself), ``parser.add_argument("--deepspeed", ...)``, or DeepSpeed's own ``--deepspeed`` switch added to
    the project's parser (``deepspeed.add_config_arguments(parser)``)."""
    based = set(_HF_BASE_NAMES)
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and not any(last_identifier(b) in based for b in node.bases):
            if any(isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.target.id == "deepspeed" for s in node.body):
                return True
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (node.func.attr == "add_config_arguments" or (
                node.func.attr == "add_argument" and any(isinstance(a, ast.Constant) and a.value == "--deepspeed" for a in node.args))):
            return True
    return False


def own_argument_fields(tree: ast.Module) -> frozenset[str]:
    """The fields the module's own subclasses of HF TrainingArguments add: a training config of this project sets such
    a key with the meaning the project's code gives it, which a reader must not take for HF's or TRL's key of that
    name. By name only: a base named ``TrainingArguments``/``Seq2SeqTrainingArguments``, or a class of the same file
    that is one."""
    out: set[str] = set()
    based = set(_HF_BASE_NAMES)
    for cls in sorted((n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)), key=lambda n: n.lineno):
        if any(last_identifier(b) in based for b in cls.bases):
            based.add(cls.name)
            out.update(s.target.id for s in cls.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name))
    # a subclass that declares `deepspeed` again still hands it to TrainingArguments.__post_init__ (the Trainer's checks)
    return frozenset(out - {"deepspeed"})


# The model-loading keyword a project's own loader takes the load dtype in (HF `from_pretrained(torch_dtype=...)`).
_LOAD_DTYPE_NAMES = ("torch_dtype",)


def _half_load_default(tree: ast.Module) -> int | None:
    """The line of the first half load-dtype default in a module: a ``torch_dtype`` field with a half default of a
    dataclass of arguments, or a ``torch_dtype`` parameter with a half default of a function (or of a method of a
    class) that calls ``from_pretrained``. A training config of the project that sets no load dtype leaves it to that
    code, whose default is half: not HF's fp32."""
    scopes = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    scopes += [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for scope in scopes:
        line = _field_default_line(scope) if isinstance(scope, ast.ClassDef) and is_dataclass(scope) else None
        if line is None and _calls_from_pretrained(scope):
            line = _parameter_default_line(scope)
        if line is not None:
            return line
    return None


def _field_default_line(cls: ast.ClassDef) -> int | None:
    return next((s.lineno for s in cls.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
                 and s.target.id in _LOAD_DTYPE_NAMES and _half_default(s.value)), None)


def _parameter_default_line(scope: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> int | None:
    functions = [scope] if not isinstance(scope, ast.ClassDef) else \
        [s for s in scope.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return next((d.lineno for fn in functions for arg, d in parameters(fn.args)
                 if d is not None and arg.arg in _LOAD_DTYPE_NAMES and _half_default(d)), None)


def _calls_from_pretrained(scope: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "from_pretrained"
               for n in ast.walk(scope))


def _half_default(node: ast.expr | None) -> bool:
    """A default that is bf16 or fp16: ``"bfloat16"``, ``torch.float16``, ``field(default="bf16")``."""
    if isinstance(node, ast.Call) and last_identifier(node.func) == "field":
        node = next((k.value for k in node.keywords if k.arg == "default"), None)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value
    elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch":
        text = node.attr
    else:
        return False
    return hf.as_dtype(text) in ("bf16", "fp16")


def _local_hf_classes(ctx: Context) -> frozenset[str]:
    return frozenset(c.name for c in ctx.src.classes if any((ctx.qualname(b) or "") in HF_CLASSES for b in c.bases))


def embedded_configs(ctx: Context) -> list[EmbeddedConfig]:
    """Every config written in this file's Python, in source order; computed once per context."""
    cached = ctx.__dict__.get("_embedded_configs")
    if cached is not None:
        return cached
    found: list[EmbeddedConfig] = []
    if applies(ctx.src.text) and not _is_test_file(ctx.src.path):
        local_hf = _local_hf_classes(ctx)
        for call in ctx.src.calls:
            recognised = _reader_of_call(ctx, call, local_hf)
            if recognised is None or _not_run(ctx, call):
                continue
            config = _call_config(ctx, call, *recognised)
            if config is not None:
                found.append(config)
        found.extend(_dataclass_configs(ctx, local_hf))
    found.sort(key=lambda c: (getattr(c.node, "lineno", 0), getattr(c.node, "col_offset", 0)))
    ctx.__dict__["_embedded_configs"] = found
    return found


# --- readings and findings --------------------------------------------------------------------------------


def read_document(doc: Document, reader: Reader) -> list[Reading]:
    """A document's readings as config lint makes them: the reading, and a DeepSpeed config written inline in it
    (HF ``deepspeed={...}``) read as the pointing config fills it in. File references are left to the config lint."""
    if reader.read is None:
        return []
    reading = reader.read(doc)
    out = [reading]
    for ref in reading.references:
        target = reader_named(ref.reader)
        if ref.inline is not None and target is not None and target.read_referenced is not None:
            out.append(target.read_referenced(ref.inline, reading, ref))
    return out


def embedded_readings(ctx: Context) -> list[Reading]:
    """The readings of the configs written in this file, with unknown values left out (see `EmbeddedConfig.unknown`)."""
    cached = ctx.__dict__.get("_embedded_readings")
    if cached is not None:
        return cached
    out: list[Reading] = []
    for config in embedded_configs(ctx):
        try:
            out.extend(read_document(config.document, config.reader))
        except READ_ERRORS:
            continue
    ctx.__dict__["_embedded_readings"] = out
    return out


def half_weights_config(ctx: Context) -> Reading | None:
    """A config written in this file that runs the forward with half weights and no autocast of its own: FSDP's
    ``MixedPrecision(param_dtype=torch.bfloat16)``, a DeepSpeed dict with its bf16/fp16 engine on. An autocast the
    file enters beside it then computes with half weights, as beside a model cast to half."""
    return next((r for r in embedded_readings(ctx)
                 if r.policy is not None and r.policy.compute in HALF and r.facts.autocast is False and r.facts.trains is not False), None)


def _variants(config: EmbeddedConfig) -> list[Document] | None:
    """The documents for every combination of the values the unknown keys could take; None for too many."""
    choices = [[(path, v) for v in DOMAINS.get(str(path[-1]), (_ABSENT,))] for path in config.unknown]
    count = 1
    for options in choices:
        count *= len(options)
    if count > MAX_VARIANTS:
        return None
    docs = []
    for combo in itertools.product(*choices):
        fills = {path: (value, config.unknown[path]) for path, value in combo if value is not _ABSENT}
        docs.append(config.document.with_overrides(fills) if fills else config.document)
    return docs


def _findings_of(doc: Document, reader: Reader) -> dict[tuple, Finding]:
    found: dict[tuple, Finding] = {}
    for reading in read_document(doc, reader):
        for f in check_policy(reading.policy, reading.facts, reading.locate()):
            # the message and severity are part of the claim: a finding whose wording depends on an unknown value
            # (which precision is rejected, how many micro-batches) holds for no single value
            found.setdefault((f.rule_id, f.location.file, f.location.line, f.location.column, f.severity, f.message), f)
    return found


def embedded_findings(ctx: Context, code_judged: frozenset[str] = frozenset()) -> list[Finding]:
    """Findings of the policy rules over this file's Python configs that hold whatever the unknown values are, located
    at the Python lines; rules in `code_judged` (which judge Python code with a detector of their own) are left out."""
    out: list[Finding] = []
    for config in embedded_configs(ctx):
        docs = _variants(config)
        if not docs:
            continue
        try:
            results = [_findings_of(doc, config.reader) for doc in docs]
        except READ_ERRORS:
            continue
        common = set(results[0]).intersection(*results[1:])
        line = getattr(config.node, "lineno", None)
        origin = f"written in Python: {config.what} at {ctx.src.path}:{line}"
        for key in sorted(common, key=lambda k: (k[2] or 0, k[3] or 0, k[0])):
            f = results[0][key]
            if f.rule_id in code_judged or f.location.file != ctx.src.path:
                continue
            out.append(replace(f, message=f"{f.message} ({origin})"))
    return out
