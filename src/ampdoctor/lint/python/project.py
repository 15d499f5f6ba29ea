"""The project model: which precision the code of each file runs under, when it is linted inside its project.

A model file rarely says its own precision: the training script that imports it enters autocast, casts the model,
or configures a framework for mixed precision, and a config file may say bf16 for the whole run. Each file is
summarised once (`Summary`: its imports, and the precision contexts it sets up if it trains); the contexts then
follow the import graph from the training files to the modules they import, nearest first, each with where it was
set up and the import it came through (`ProjectContext`). A file linted alone has no project context and is
judged on its own evidence, as before."""

from __future__ import annotations

import ast
import functools
import hashlib
import io
import re
import tokenize
from collections import deque
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Callable, Container, Iterable, Iterator, Mapping, Sequence

from ampdoctor.lint.launch import Launch, option_values, runs_of, short_path
from ampdoctor.lint.python.config_values import ConfigValues
from ampdoctor.lint.python.dataflow import HALF, autocast_argument
from ampdoctor.lint.python.facts import AUTOCASTS, MODEL_TOKENS, half_setting
from ampdoctor.lint.python.kind import CodeKind, Kind, runs_training_loop, site_kind
from ampdoctor.lint.python.resolve import words
from ampdoctor.lint.python.words import TextWords, text_and_words

if TYPE_CHECKING:
    from ampdoctor.lint.python.context import Context
    from ampdoctor.lint.python.facts import Facts

# How far a context follows imports from the training file (trainer -> model -> layers -> kernels).
MAX_HOPS = 3


@dataclass(frozen=True)
class Evidence:
    """A precision context with its provenance: ``bf16 autocast at train.py:42, through `from model import GPT```."""

    what: str  # "bf16 autocast", "a model cast to bf16", "bf16 mixed precision (accelerate config)"
    dtypes: frozenset[str]
    file: str
    line: int
    through: str = ""
    # a training config whose half precision comes from casting the weights (DeepSpeed's bf16/fp16 engines, a
    # torchtune or bf16-true run): it enters no autocast; or a training file's autocast around a model it casts to
    # half itself (``model.to(torch.bfloat16)`` beside ``torch.autocast``), whose weights are half under it as well
    casts_weights: bool = False
    # a training config whose framework runs the training step under autocast (Lightning's bf16-mixed, accelerate's
    # mixed_precision, the HF Trainer's bf16): the code that step calls computes under it
    autocasts: bool = False
    # A cast reached through `from models import GPT`: the classes of the reached file the training file builds its
    # model from. The cast reaches them and the classes they build, not every model of their file
    # (`Context.half_model_at`); empty: the whole file.
    classes: frozenset[str] = frozenset()
    # The test of the branch that holds it in its file, where no run the project makes of that file takes it
    # (`Facts.option_only`: ``args.fp16``, a flag no launcher passes): what it says holds only for runs that set it.
    only_with: str = ""
    # The device an autocast enters it on, where its call names one ("cpu", "cuda"); "" where it does not. CUDA's
    # autocast casts more ops than the CPU's (einsum whatever it contracts): a rule about those reads it.
    device: str = ""

    def describe(self) -> str:
        where = f"{self.what} ({self.file}:{self.line}"
        return where + (f", {self.through})" if self.through else ")")

    def via(self, through: str) -> "Evidence":
        """The same evidence, one step further from where it was set up (steps read in the order they happen)."""
        return replace(self, through=f"{self.through}, then {through}" if self.through else through)


# What `ProjectContext.weights_fp32` establishes, as the findings that rest on it say it.
WEIGHTS_FP32_SAID = "no file of this project casts a model to half or loads one in half, nor does a config of it"


@dataclass(frozen=True)
class ProjectContext:
    """What the project says about the precision one file's code runs under."""

    autocast: Evidence | None = None  # reached from a training file that runs it under half autocast
    half_model: Evidence | None = None  # reached from a training file that casts the model to half, without autocast
    half: Evidence | None = None  # a training config that runs this file's code says bf16/fp16
    torch_floor: tuple[tuple[int, int], str] | None = None  # the oldest torch the project allows, and where it says so
    # A training config somewhere in the project trains in bf16: the project's runs include bf16 ones, whether or
    # not this file is reached from them (weaker than `half`; said as such).
    trains_bf16: Evidence | None = None
    # Other modules of the project turn autocast off around their own math: the project's models are written to run
    # under autocast (weaker than `autocast`; said as such).
    guarded: Evidence | None = None
    # A file of the project enters autocast on the CPU (a test, say), and this file reads CUDA's autocast state with no
    # device: its code is run under CPU autocast, where that state is off.
    cpu_autocast: Evidence | None = None
    # Every half dtype named by the contexts that reach this file (all of them, not only the nearest cited above)
    # and by the project's training configs: {"bf16"} when all the precision this code is run under is bf16.
    precisions: frozenset[str] = frozenset()
    # The file was linted inside its project (a folder), and no file of that project enters autocast or hands its
    # training to a framework that would (`AUTOCAST_SIGNS`), nor does a training config of it run mixed precision,
    # and the project runs training of its own (`kind.TRAINING_LOOP`; a library is run by its users' code) or is an
    # application (no installable package, with scripts of its own, which are all that run it): whatever depends on
    # running under autocast cannot happen in this project's own runs.
    autocast_nowhere: bool = False
    # The file was linted inside its project (a folder) that runs training of its own (`kind.TRAINING_LOOP`), and
    # nothing the project model reads puts this file's code under autocast: no module run under half autocast imports
    # it, no half training config runs it. (An installable package counts too: a project that trains with its own
    # loops and never under autocast around this code does not exercise it so; a library with no loop of its own is
    # run by its users' code and never gets here.) Weaker than `autocast_nowhere`: other code of the project may autocast, and a
    # framework trainer may be told to at launch; what depends on running under autocast is possible, not known.
    autocast_unseen: bool = False
    # The options the project's shell launchers pass this script (`lint.launch`): (name, value, written literally).
    # Its own facts read them as values its options hold (`Facts._options`).
    launch: tuple[tuple[str, str | bool, bool], ...] = ()
    # The same, launch line by launch line (`lint.launch.runs_of`): the runs the project makes of this script, each
    # with where it is written; `Facts.dtypes_per_run` reads a dtype in each.
    runs: tuple[tuple[str, tuple[tuple[str, str | bool, bool], ...]], ...] = ()
    # Module-level functions of this file that apply an autograd Function (`Summary.helpers`) and that nothing in its
    # project calls or imports, in a project that is no installable package (whose users could call them): code its
    # own runs never reach.
    unused_helpers: frozenset[str] = frozenset()
    # A file of the project runs its code on a device other than CUDA (it picks MPS, an NPU or XPU, or enters CPU
    # autocast), and this file pins an fp32 autocast region to CUDA, which does nothing there.
    other_device: Evidence | None = None
    # What the project's YAML configs write for the keys that name a dtype or a precision (`config_values`): the
    # dtype a file reads from its config object (``DTYPES[cfg.fsdp.reduce_dtype]``) is one of those its configs give.
    config_values: ConfigValues | None = None
    # A training config that governs this file's folder runs the training step under autocast (`Evidence.autocasts`),
    # whether or not the project model links its code to the step: code the step calls runs under that autocast.
    config_autocast: Evidence | None = None
    # The file is part of what the project's installable package gives its users (`_shipped`): its public code is
    # also run by their code, under whatever precision they choose, which the project cannot show.
    shipped: bool = False
    # The file was linted inside its project (a folder) that runs training of its own, no file of that project shows
    # a sign of casting a model to half or loading one in half (`half_weights_sign`), and no training config of it
    # casts the weights (DeepSpeed's bf16 engine, a `bf16-true` run): the project's weights stay fp32, whatever
    # autocast computes in. Given only to a file whose findings it concerns (`Summary.weights_dtype`).
    weights_fp32: bool = False
    # Another file of the project that unscales a loss scaler's gradients (``scaler.unscale_(optimizer)``), given
    # only to a file that clips gradients and scales a loss: a step it splits over methods that file calls may be
    # unscaled there, between them.
    unscaled_in: str = ""

    def __bool__(self) -> bool:
        return any((self.autocast, self.half_model, self.half, self.guarded, self.cpu_autocast, self.other_device,
                    self.autocast_nowhere, self.autocast_unseen, self.unused_helpers, self.shipped, self.weights_fp32,
                    self.unscaled_in))

    def digest(self) -> str:
        # asked once per file linted (`lint.cache.key`), of a context most files of a project share: kept once made
        made = self.__dict__.get("_digest")
        if made is None:
            made = hashlib.sha256(repr(self).encode()).hexdigest()[:16]
            object.__setattr__(self, "_digest", made)
        return made


@dataclass(frozen=True)
class Summary:
    """What the project model needs of one file."""

    path: str
    module: str  # dotted name below the lint root ("pkg.model"; a package's __init__ is the package)
    imports: tuple[tuple[str, int], ...]  # (absolute dotted name, line)
    autocast: Evidence | None = None  # this training file runs what it imports under half autocast
    half_model: Evidence | None = None  # this training file casts its model to half without autocast
    model_classes: tuple[str, ...] = ()  # ... a model built by these classes (a cast reaches only what defines them)
    configs: tuple[tuple[str, int], ...] = ()  # config file names this training file mentions, with the line
    half: Evidence | None = None  # set by the model: a training config this file names trains in half
    guards: int | None = None  # a line where this (library) file turns autocast off around its own math
    # the file may compute rotary angles (a matmul of frequencies): a guard elsewhere concerns it, and, in a package
    # that ships it, its users' autocast
    angles: bool = False
    sensitive: bool = True  # a project context could change the file's findings (a detector that reads it would run)
    cpu_autocast: int | None = None  # a line where this file enters autocast on the CPU
    autocast_state: bool = False  # the file reads autocast's state with no device (CUDA's): a CPU autocast elsewhere concerns it
    helpers: tuple[str, ...] = ()  # module-level functions that apply an autograd Function (`apply_helpers`)
    loop: bool = False  # the file runs a training loop of its own (`kind.TRAINING_LOOP`)
    pins_cuda: bool = False  # the file pins an fp32 autocast region to CUDA: the devices its project runs on concern it
    functions: bool = False  # the file defines an autograd Function: whether its package ships it concerns it
    weights_dtype: bool = False  # the file scales a loss or decomposes tensors: whether its weights can be half concerns it
    clips: bool = False  # the file clips gradients and scales a loss: where its project unscales concerns it
    unscales: bool = False  # the file unscales a loss scaler's gradients (``scaler.unscale_(optimizer)``)
    script: bool = False  # the file runs as a script (``if __name__ == "__main__":`` at its top level)


# `from pkg.model import GPT, Config` on one line, or parenthesized over several (black's style for a long list,
# with comments between the names): the names of the second kind are in the first group, of the first in the second.
# A comment inside the parentheses may hold a `)` of its own: the group reads comments whole.
_FROM = re.compile(r"^[ \t]*from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(?:\(((?:[^)#]|#[^\n]*)*)\)|([^#\n]*))", re.M)
_COMMENT = re.compile(r"#[^\n]*")
_IMPORT = re.compile(r"^[ \t]*import[ \t]+([\w., \t]+?)[ \t]*(?:#.*)?$", re.M)


def from_import_statements(text: str) -> Iterator[str]:
    """The text of each ``from X import ...`` statement of a file (a parenthesized list whole), read without parsing."""
    return (m.group(0) for m in _FROM.finditer(text))


def module_name(rel_path: str) -> str:
    parts = list(PurePosixPath(rel_path).with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(p for p in parts if p not in ("", ".", "/"))


def imports_of(text: str, module: str, is_package: bool) -> tuple[tuple[str, int], ...]:
    """The classes a file imports AND constructs, absolute: ``from .model import GPT`` in ``pkg.train`` with
    ``GPT(cfg)`` (or ``GPT.from_pretrained(...)``) below -> pkg.model.GPT, and ``model.GPT(cfg)`` after ``from pkg
    import model``; likewise the model factories it calls (``build_model(cfg)``, `builds`). Modules are built from
    classes; any other helper function a trainer calls (a logger, a data loader) is not run under its autocast, and
    following it would spread the trainer's precision over every module the helper's module imports. A package's
    ``__init__`` keeps all its imports, for the re-exports a class name is found through. Read from the text:
    cheap, and also for files no check parses."""
    out: list[tuple[str, int]] = []
    package = _package(module, is_package)
    if is_package and (loop := _PLUGIN_IMPORT.search(text)) and _FOLDER_LISTING.search(text):
        out.append((f"{module}.*" if module else "*", text.count("\n", 0, loop.start()) + 1))
    called = _called_names(text)
    for m in _FROM.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        base = _absolute(m.group(1), package)
        if not base:
            continue
        for name, alias in _from_items(m):
            if not name.isidentifier():
                continue
            if is_package or (builds(name) and ("" in called.get(alias, ()) or called.get(alias, set()) & _LOADERS)):
                out.append((f"{base}.{name}", line))
            out.extend((f"{base}.{name}.{attr}", line) for attr in called.get(alias, ()) if builds(attr))
    for m in _IMPORT.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        for name, alias in _import_items(m):
            out.extend((f"{name}.{attr}", line) for attr in called.get(alias, ()) if name and builds(attr))
    return tuple(out)


# A package that imports every module of its folder at run time (a registry of plugins: fairseq's models and
# tasks, a trainer's callbacks): `importlib.import_module` on a computed name beside a listing of the folder. Its
# imports are then all its modules and subpackages (`ProjectModel.imports` expands ``pkg.*``).
_PLUGIN_IMPORT = re.compile(r"\bimport_module\(\s*(?![\"'][\w.]*[\"']\s*[,)])")
_FOLDER_LISTING = re.compile(r"\b(?:listdir|scandir|iterdir|glob|iglob|iter_modules|walk_packages)\(")


# A function that builds the model for its caller (`build_model(cfg)`, `create_model`, timm's and detectron2's
# spelling, `make_policy`, `get_network`, Megatron's `model_provider`): what it constructs runs under the caller's
# precision as a class built in place would. Named verb first and model last (`get_config_model_id` returns a name).
_BUILD_VERBS = frozenset({"build", "create", "make", "get", "load", "init", "instantiate", "setup"})
_BUILDERS = frozenset({"provider", "factory", "builder"})
# The words that end a factory's name: a model's kinds. Not the general words a model is also known by in code
# (`module`, `pipeline`, `ema`, `lm`): `get_module(model, name)`, `load_module(path)`, `make_pipeline`, `init_ema` and
# `create_data_module` are helpers, and following them spreads a trainer's precision over a utilities module.
_FACTORY_WORDS = MODEL_TOKENS - {"models", "module", "lm", "ema", "pipe", "pipeline"}


# Class methods that build an instance of their class: `UNet2DConditionModel.from_pretrained(...)`, Lightning's
# `Model.load_from_checkpoint(...)`, diffusers' `from_single_file`.
_LOADERS = frozenset({"from_pretrained", "from_config", "from_single_file", "from_checkpoint", "load_from_checkpoint"})


def builds(name: str) -> bool:
    """Does calling `name` build a module: a class (capitalised, by Python's convention) or a model factory?"""
    if name[:1].isupper():
        return True
    parts = words(name)
    return len(parts) > 1 and ((parts[0] in _BUILD_VERBS and parts[-1] in _FACTORY_WORDS) or (parts[0] in _FACTORY_WORDS and parts[-1] in _BUILDERS))


_CALL = re.compile(r"\b([A-Za-z_]\w*)(?:\.(\w+))?\s*\(")


def _called_names(text: str) -> dict[str, set[str]]:
    """Names called in the text (``GPT(``), with the attribute called on them (``model.GPT(`` -> {model: {GPT}})."""
    out: dict[str, set[str]] = {}
    for m in _CALL.finditer(text):
        out.setdefault(m.group(1), set()).add(m.group(2) or "")
    return out


def _from_items(m: re.Match[str]) -> list[tuple[str, str]]:
    """The (name, alias) pairs of a `_FROM` match: ``from x import a as b, c`` -> [(a, b), (c, c)]."""
    names = _COMMENT.sub("", m.group(2)) if m.group(2) is not None else m.group(3)
    return [_as(item) for item in names.split(",")]


def _import_items(m: re.Match[str]) -> list[tuple[str, str]]:
    """The (dotted name, alias) pairs of an `_IMPORT` match: ``import a.b as c, d`` -> [(a.b, c), (d, d)]."""
    return [_as(item) for item in m.group(1).split(",")]


def _as(item: str) -> tuple[str, str]:
    name, _, alias = item.strip().partition(" as ")
    return name.strip(), alias.strip() or name.strip()


def _package(module: str, is_package: bool) -> str:
    """The package a module's relative imports start from: a package's own name, else its parent's."""
    return module if is_package else module.rpartition(".")[0]


def _absolute(base: str, package: str) -> str:
    if not base.startswith("."):
        return base
    dots = len(base) - len(base.lstrip("."))
    pieces = package.split(".") if package else []
    pieces = pieces[: len(pieces) - (dots - 1)] if dots > 1 else pieces
    rest = base.lstrip(".")
    return ".".join([*pieces, *([rest] if rest else [])])


@dataclass
class ProjectModel:
    summaries: dict[str, Summary]
    config_half: Sequence[Evidence] = ()  # the project's training configs that run in a half dtype
    # rel path -> its text, for the imports of the files the propagation reaches (read only then: most files of a
    # big tree are never reached, and reading the imports of all of them would cost a regex pass each)
    text_of: Callable[[str], str | None] | None = None
    torch_floor: tuple[tuple[int, int], str] | None = None
    trains_bf16: Evidence | None = None
    # rel path -> the context the configs that govern the file give it (`reach.ConfigScope.base`: its bf16 config and
    # their half dtypes). None: every config of `config_half` governs every file, and `trains_bf16` is as given.
    base_of: Callable[[str], ProjectContext] | None = None
    folder: bool = False  # the summaries are every file of a folder linted (files named alone are not a project)
    packaged: bool = False  # the project is an installable package (pyproject.toml, setup.py): users call its functions
    # rel paths of the folder's files that no Python 3 compiles (`reach.cannot_run`): they run nothing, but one being
    # edited will again, so their text is read for what it may do (enter autocast, call a helper)
    unparsed: tuple[str, ...] = ()
    # rel path of a Python script -> the commands of the project's shell launchers that start it (their `file`s
    # below the project too)
    launches: Mapping[str, Sequence[Launch]] = field(default_factory=dict)
    _launched: dict[str, Evidence] = field(default_factory=dict)  # path -> the autocast its launcher turns on
    _index: dict[str, list[str]] = field(default_factory=dict)
    _imports: dict[str, tuple[tuple[str, int], ...]] = field(default_factory=dict)
    _reaching: dict[str, frozenset[str]] = field(default_factory=dict)  # path -> the dtypes of every context reaching it
    _classes: dict[str, list[tuple[str, int, int]]] = field(default_factory=dict)  # path -> its classes' names and lines
    _helper_candidates: dict[str, tuple[str, ...]] | None = None  # `_candidates`
    _mentions: dict[str, list[str]] | None = None  # helper name -> the files whose text names it (`_mentioned`)
    _reached_helpers: frozenset[str] | None = None  # `_helpers_reached`
    _loop: bool | None = None  # `_trains`
    _with_modules: frozenset[PurePosixPath] | None = None  # `_module_folders`
    _unparsed_signs: bool | None = None  # `_unparsed_autocast`

    def __post_init__(self) -> None:
        for path, summary in self.summaries.items():
            parts = summary.module.split(".") if summary.module else []
            for i in range(len(parts)):
                self._index.setdefault(".".join(parts[i:]), []).append(path)

    def resolve(self, importer: str, dotted: str, depth: int = 0) -> str | None:
        """The project file an import names, the one nearest the importer when several end with that name: the
        module itself, or for ``pkg.model.GPT`` the module that defines GPT, following a package's re-export."""
        found = self._lookup(importer, dotted)
        if found is not None or "." not in dotted or depth > 4:
            return found
        owner, _, name = dotted.rpartition(".")
        path = self._lookup(importer, owner)
        if path is None or not path.endswith("__init__.py"):
            return path
        again = next((d for d, _ in self.imports(path) if d.rpartition(".")[2] == name), None)
        return (self.resolve(path, again, depth + 1) or path) if again else path

    def imports(self, path: str) -> tuple[tuple[str, int], ...]:
        summary = self.summaries[path]
        if summary.imports or self.text_of is None:
            return self._plugins(path, summary.imports)
        if path not in self._imports:
            text = self.text_of(path)
            found = imports_of(text, summary.module, path.endswith("__init__.py")) if text else ()
            self._imports[path] = self._plugins(path, found)
        return self._imports[path]

    def _plugins(self, path: str, found: tuple[tuple[str, int], ...]) -> tuple[tuple[str, int], ...]:
        """`found` with a package's run-time import of its whole folder (``pkg.*``, `_PLUGIN_IMPORT`) as the modules
        and subpackages there."""
        loop = next((line for dotted, line in found if dotted == "*" or dotted.endswith(".*")), None)
        if loop is None:
            return found
        folder = PurePosixPath(path).parent
        children = sorted(s.module for p, s in self.summaries.items() if p != path and s.module
                          and (PurePosixPath(p).parent == folder or PurePosixPath(p).parent.parent == folder and p.endswith("/__init__.py")))
        return tuple(i for i in found if not (i[0] == "*" or i[0].endswith(".*"))) + tuple((m, loop) for m in children)

    def _lookup(self, importer: str, dotted: str) -> str | None:
        found = [p for p in self._index.get(dotted, ()) if self._importable(p, dotted, importer)]
        if not found:
            return None
        return found[0] if len(found) == 1 else _nearest(found, importer)

    def _importable(self, path: str, dotted: str, importer: str) -> bool:
        """Can `dotted` name the file at `path`: does the folder holding its first component sit where imports start
        (the lint root, a folder that is no package, such as `src/`, the importer's own folder, for a script's
        sibling import, or a folder above a script that is in no package, which such scripts put on `sys.path` to
        import their project's packages)? Inside a package it cannot: HF's ``import transformers`` is not diffusers'
        own ``models/transformers`` subpackage."""
        parts = PurePosixPath(path).with_suffix("").parts
        depth = len(dotted.split(".")) + (parts[-1] == "__init__")
        start = "/".join(parts[:-depth]) if depth < len(parts) else ""
        folder = PurePosixPath(importer).parent
        if not start or start == str(folder):
            return True
        if folder.is_relative_to(start) and f"{folder}/__init__.py" not in self.summaries:
            return True
        return f"{start}/__init__.py" not in self.summaries

    def contexts(self) -> dict[str, ProjectContext]:
        """The context of every file a training file's precision reaches (files reached by none are left out)."""
        self._name_configs()
        self._launch_autocast()
        # a launched script runs under its launcher's autocast itself, as well as what it imports
        autocast = {**self._spread("autocast"), **self._launched}
        half_model = self._spread("half_model")
        half = self._spread("half")
        guards = [(p, s.guards) for p, s in sorted(self.summaries.items()) if s.guards is not None]
        cpu = {p: s.cpu_autocast for p, s in sorted(self.summaries.items()) if s.cpu_autocast is not None}
        nowhere = self._autocast_nowhere(own_runs=True)  # true only where no file has a guard: `guards` is then empty
        if guards and not nowhere and self._autocast_nowhere(past_guards=True):
            guards = []  # a guard copied with library code is the only sign: no run of the project enters autocast
        devices = self._devices(cpu)
        weights_fp32 = self._weights_fp32()
        unscaling = self._unscaling()
        every = ProjectContext(trains_bf16=self.trains_bf16, precisions=frozenset().union(*(e.dtypes for e in self.config_half)),
                               config_autocast=next((e for e in self.config_half if e.autocasts), None))
        out: dict[str, ProjectContext] = {}
        for path, summary in self.summaries.items():
            if not summary.sensitive:
                continue  # nothing of its findings can change: not linted again
            guarded, cpu_autocast = _nearest_signs(path, summary, guards, cpu)
            own = summary.half.dtypes if summary.half is not None else frozenset()
            runs_half = summary.half or half.get(path)
            base = self.base_of(path) if self.base_of is not None else every
            ctx = ProjectContext(autocast.get(path), None if path in autocast else half_model.get(path),
                                 runs_half, self.torch_floor, base.trains_bf16, guarded, cpu_autocast,
                                 self._reaching.get(path, frozenset()) | own | base.precisions, nowhere,
                                 runs_half is None and self._autocast_unseen(path, autocast),
                                 option_values(self.launches.get(path, ())), runs_of(self.launches.get(path, ())),
                                 self._unused_helpers(path), _nearest_device(path, summary, devices),
                                 config_values=base.config_values, config_autocast=base.config_autocast,
                                 shipped=self._ships_to_users(path, summary), weights_fp32=weights_fp32 & summary.weights_dtype,
                                 unscaled_in=_unscaled_elsewhere(path, summary, unscaling))
            if ctx:
                out[path] = ctx
        return out

    def _devices(self, cpu: Mapping[str, int]) -> dict[str, tuple[str, int]]:
        """By file, what it runs its code on besides CUDA, said as evidence is (`other_device_line`, or CPU autocast),
        and where.
        Only asked where a file of the project pins an fp32 autocast region to CUDA (none in most projects): the
        texts are then read again, rather than scanned for device names in every file of every project."""
        if not any(s.pins_cuda for s in self.summaries.values()):
            return {}
        devices = {p: ("enters autocast on the CPU", line) for p, line in cpu.items()}
        for path in sorted(self.summaries) if self.text_of is not None else ():
            picked = other_device_line(self.text_of(path) or "")
            if picked is not None:
                devices[path] = (f"runs on {picked[0]}", picked[1])
        return devices

    def _autocast_unseen(self, path: str, autocast: Mapping[str, Evidence]) -> bool:
        """`ProjectContext.autocast_unseen` for the file at `path` (no half training config runs it: the caller's
        part), given the files the spread of half autocast reached."""
        return (self.folder and self.summaries[path].autocast is None and path not in autocast
                and self._trains() and path not in self._helpers_reached(autocast) and not self._unparsed_autocast())

    def _fixable(self) -> list[str]:
        """The files of `unparsed` that may run once fixed: all but templates (`_template`), which are never fixed in
        place."""
        return [p for p in self.unparsed if not _template(p)]

    def _unparsed_autocast(self) -> bool:
        """Does the text of a file that does not compile show a sign of autocast (`AUTOCAST_SIGNS`; unreadable: yes)?
        Once fixed it may run anything under it. A template (`_template`) is never fixed in place: what runs is the
        file rendered from it elsewhere. Asked once: the answer is the folder's."""
        if self._unparsed_signs is None:
            texts = (self.text_of(p) if self.text_of is not None else None for p in self._fixable())
            self._unparsed_signs = any(t is None or AUTOCAST_SIGNS.search(t.lower()) for t in texts)
        return self._unparsed_signs

    def _helpers_reached(self, autocast: Mapping[str, Evidence]) -> frozenset[str]:
        """The files that a module run under half autocast (a training file's own, or one the spread reached) imports
        anything from, functions too: the spread follows the classes a trainer builds, but a model module's forward
        runs the helpers it imports (a checkpoint function, a norm) under the same autocast. Computed once, on first
        ask; a file that cannot be read adds nothing."""
        if self._reached_helpers is None:
            running = sorted({*autocast, *(p for p, s in self.summaries.items() if s.autocast is not None)})
            found: set[str] = set()
            for importer in running if self.text_of is not None else ():
                text = self.text_of(importer) or ""
                package = _package(self.summaries[importer].module, importer.endswith("__init__.py"))
                dotted = [f"{base}.{name}" for m in _FROM.finditer(text) if (base := _absolute(m.group(1), package))
                          for name, _ in _from_items(m) if name.isidentifier()]
                dotted += [name for m in _IMPORT.finditer(text) for name, _ in _import_items(m) if name]
                found.update(t for d in dotted if (t := self.resolve(importer, d)) is not None and t != importer)
            self._reached_helpers = frozenset(found)
        return self._reached_helpers

    def _unused_helpers(self, path: str) -> frozenset[str]:
        """Which of the file's `helpers` nothing in the project calls: not the file itself (any other mention of the
        name), and no other file that imports it from this module (``from .util import checkpoint``, a star import)
        or imports the module and names it as an attribute (``util.checkpoint``). Only in a folder that is no
        installable package, or for private names: a package's public functions are called by its users' code."""
        candidates = self._candidates().get(path, ())
        if not candidates:
            return frozenset()
        mentioned = self._mentioned()
        return frozenset(name for name in candidates
                         if not any(self._imports_helper(other, path, name) for other in mentioned[name] if other != path))

    def _ships_to_users(self, path: str, summary: Summary) -> bool:
        """The file is shipped (`_shipped`) and holds code its users run under their own precision: an autograd
        Function, rotary angles."""
        return (summary.functions or summary.angles) and self._shipped(path)

    def _shipped(self, path: str) -> bool:
        """Is the file part of what the installable package gives its users (`packaged`)? A module at the top of the
        project is taken to be; one below is only inside a regular package (folders of ``__init__.py`` from its own
        up) whose outermost folder sits at the top or in a folder of no modules (``src/``). A folder of scripts and
        the packages they import as siblings (``demo.py`` beside ``models/``, run from that folder) is no part of it:
        nothing but those scripts calls its functions."""
        return self.packaged and shipped_module(path, self.summaries, self._module_folders())

    def _module_folders(self) -> frozenset[PurePosixPath]:
        """The folders that hold a module of the project directly (computed once)."""
        if self._with_modules is None:
            self._with_modules = frozenset(PurePosixPath(p).parent for p in self.summaries)
        return self._with_modules

    def _candidates(self) -> dict[str, tuple[str, ...]]:
        """By file, its helpers that its own code names only where it defines them (not called, passed or exported
        there), and that a package's users cannot call (private, or no package)."""
        if self._helper_candidates is None:
            self._helper_candidates = {}
            for path, summary in self.summaries.items() if self.folder and self.text_of is not None else ():
                if not summary.sensitive:
                    continue
                names = [n for n in summary.helpers if not (self._shipped(path) and not n.startswith("_"))]
                own = self.text_of(path) if names else None
                if own is not None:
                    self._helper_candidates[path] = tuple(n for n in names if _name_tokens(own, n) == 1)
        return self._helper_candidates

    def _mentioned(self) -> dict[str, list[str]]:
        """Every candidate helper name (`_candidates`) -> the files whose text names it (an unreadable file: every
        name), found in one pass over the project's texts, and only once a file with such a helper asks."""
        if self._mentions is None:
            names = sorted({n for found in self._candidates().values() for n in found})
            words = {n: re.compile(rf"\b{re.escape(n)}\b") for n in names}
            self._mentions = {n: [] for n in names}
            for path in (*self.summaries, *self.unparsed) if names and self.text_of is not None else ():
                text = self.text_of(path)
                for n in names:
                    if text is None or (n in text and words[n].search(text)):
                        self._mentions[n].append(path)
        return self._mentions

    def _imports_helper(self, importer: str, path: str, name: str) -> bool:
        """Does `importer` reach the function `name` of the file at `path` (unreadable, or a file that does not compile
        naming it: assumed so)?"""
        text = self.text_of(importer)
        if text is None or importer not in self.summaries:
            return True
        package = _package(self.summaries[importer].module, importer.endswith("__init__.py"))
        for m in _FROM.finditer(text):
            base = _absolute(m.group(1), package)
            if base and self._from_import_reaches(importer, path, name, base, {n for n, _ in _from_items(m)}, text):
                return True
        return any(dotted and self.resolve(importer, dotted) == path and f".{name}" in text
                   for m in _IMPORT.finditer(text) for dotted, _ in _import_items(m))

    def _from_import_reaches(self, importer: str, path: str, name: str, base: str, names: set[str], text: str) -> bool:
        """``from base import names`` in `importer` brings in the function itself (by name or a star), or the module
        at `path`, which the text then names it through (``util.checkpoint``)."""
        if (name in names or "*" in names) and self.resolve(importer, f"{base}.{name}") == path:
            return True
        return any(self.resolve(importer, f"{base}.{n}") == path and f"{n}.{name}" in text for n in names if n.isidentifier())

    def _autocast_nowhere(self, past_guards: bool = False, own_runs: bool = False) -> bool:
        """No file of this folder shows a sign of running under autocast (`AUTOCAST_SIGNS`) and no training config
        of it runs half precision through autocast (one that casts the weights, as DeepSpeed's bf16 engine, enters
        none), while some file of it runs a training loop (`kind.TRAINING_LOOP`): a folder with none is
        a library, run by its users' code, which may enter autocast. With `own_runs`, also a folder that runs no
        training loop, is no installable package and has scripts of its own (``if __name__ == "__main__":``, a
        model's inference scripts): it is an application, its scripts are what runs its code, and none of them enters
        autocast. Read from the files' text only when the
        summaries leave it open, and only until the first sign (a file that cannot be read leaves it open: no).
        With `past_guards`, an autocast turned off (`_GUARD`: model code copied from a library that guards its own
        math) is no sign: it says the code was written for autocast, not that this project's runs enter one."""
        if not self.folder or self.text_of is None or any(not e.casts_weights for e in self.config_half):
            return False
        if any(s.autocast is not None or (s.guards is not None and not past_guards) for s in self.summaries.values()):
            return False
        # A `...trainer(` call is no sign when it builds a class ending in "trainer" that the project defines on no
        # base class (``class MixedPrecisionTrainer:``, a master-weight helper of a model cast to half): that runs
        # the project's own code, not a framework's that would enter autocast. Both are collected in the one pass.
        called: set[str] = set()
        own: set[str] = set()
        scripts = False
        for path in (*self.summaries, *self._fixable()):
            text = self.text_of(path)
            trainers = _trainer_signs(text, past_guards) if text is not None else None
            if trainers is None:
                return False
            called |= trainers[0]
            own |= trainers[1]
            scripts = scripts or _MAIN_GUARD.search(text) is not None
        return (self._trains() or (own_runs and not self.packaged and scripts)) and called <= own

    def _unscaling(self) -> list[str]:
        """The files that unscale a loss scaler's gradients (`Summary.unscales`), in path order."""
        return [p for p, s in sorted(self.summaries.items()) if s.unscales]

    def _weights_fp32(self) -> bool:
        """`ProjectContext.weights_fp32`: a folder that trains (`_trains`: its model is built and run by its own
        code, not a user's) none of whose files, compiled or not, shows a sign of half weights, and none of whose
        training configs casts them. Asked only where a file's findings depend on it (`Summary.weights_dtype`); the
        texts are read then, and only until the first sign (most projects that have one show it early), since the
        sign's pattern is too costly to look for in every file linted (a file that cannot be read: no)."""
        if not self.folder or self.text_of is None or not any(s.weights_dtype for s in self.summaries.values()) \
                or not self._trains() or any(e.casts_weights for e in self.config_half):
            return False
        texts = (self.text_of(p) for p in (*self.summaries, *self._fixable()))
        return not any(t is None or half_weights_sign(t) is not None for t in texts)

    def _trains(self) -> bool:
        """Some file of the folder runs a training loop of its own: a folder with none is a library, run by its
        users' code. Found once: every file's context asks."""
        if self._loop is None:
            self._loop = any(s.loop for s in self.summaries.values())
        return self._loop

    def _name_configs(self) -> None:
        """A training file that names a half-precision training config of the project (by file name) trains in
        half: a bf16 config somewhere in the tree says nothing of a script that does not use it."""
        by_name = {PurePosixPath(e.file).name: e for e in self.config_half}
        if not by_name:
            return
        for path, summary in list(self.summaries.items()):
            # named by the script, or passed to it by a launcher (`deepspeed train.py --deepspeed ds_config.json`,
            # `composer train.py yamls/mpt-125m.yaml`)
            places = [(n, f"{short_path(path)}:{line}") for n, line in summary.configs]
            places += [(name, f"{short_path(launch.file)}:{launch.line}") for launch in self.launches.get(path, ())
                       for value in launch.values() if (name := config_name(value)) is not None]
            named = next(((by_name[n], where) for n, where in places if n in by_name), None)
            if named is not None and summary.half is None:
                evidence, where = named
                self.summaries[path] = replace(summary, half=evidence.via(f"named at {where}"))

    def _launch_autocast(self) -> None:
        """A script that a launcher of the project starts with a flag turning half mixed precision on runs what it
        imports under that autocast: the launcher's own flag (`accelerate launch --mixed_precision bf16`), or one
        given to the script that its code never names (HF's `--bf16 True`, Lightning's `--precision bf16-mixed`),
        which its framework's argument parser reads. A flag the script names is the script's to interpret: its
        value is one its option holds (`ProjectContext.launch`, read by `Facts`). Only a value written out counts:
        one read from a shell variable may be anything. What a flag the script never names does is its framework's:
        autocast where the script parses its arguments with a parser of a framework that autocasts for such a flag
        (`AUTOCAST_PARSERS`), and otherwise (Megatron's and fairseq's `--bf16`/`--fp16` cast the model) only that the
        run is half (`half`). So is a launch that hands the run to DeepSpeed (`--deepspeed ds_config.json`):
        accelerate and the HF Trainer leave half precision to DeepSpeed's engine, which casts the model."""
        for path, launches in sorted(self.launches.items()):
            summary = self.summaries.get(path)
            if summary is None or summary.autocast is not None:
                continue
            named = _code_names((self.text_of(path) if self.text_of is not None else None) or "")
            for launch in launches:
                flag = next((f for f in (*launch.launcher_flags, *launch.script_flags) if f.literal and half_setting(f.key, f.value)
                             and (f in launch.launcher_flags or f.key not in named)), None)
                if flag is None:
                    continue
                dtypes = half_setting(flag.key, flag.value)
                if launch.deepspeed or not (flag in launch.launcher_flags or named & AUTOCAST_PARSERS):
                    if summary.half is None:
                        evidence = Evidence(f"{_names(dtypes)} run (`{flag.text}` on a launch line)", dtypes, launch.file, flag.line)
                        self.summaries[path] = replace(summary, half=evidence)
                    break
                evidence = Evidence(f"{_names(dtypes)} mixed precision (`{flag.text}` on a launch line)", dtypes, launch.file, flag.line)
                self._launched[path] = evidence
                self.summaries[path] = replace(summary, autocast=evidence)
                break

    def _spread(self, kind: str) -> dict[str, Evidence]:
        """Breadth-first from each training file that sets up a context of `kind`, along its imports."""
        reached: dict[str, Evidence] = {}
        queue: deque[tuple[str, Evidence, int]] = deque()
        for path, summary in sorted(self.summaries.items()):
            evidence = getattr(summary, kind)
            if evidence is not None:
                queue.append((path, evidence, 0))
        if kind == "autocast":
            for path, evidence in self._trainer_autocast().items():
                reached[path] = evidence
                queue.append((path, evidence, 0))
        seen_from: set[tuple[str, str]] = set()
        while queue:
            path, evidence, hops = queue.popleft()
            if hops >= MAX_HOPS:
                continue
            summary = self.summaries[path]
            for dotted, line in self.imports(path):
                built = dotted.rpartition(".")[2]
                if hops == 0 and kind == "half_model" and built not in summary.model_classes:
                    continue  # a cast reaches the module of the model it casts, not every class the script builds
                target = self.resolve(path, dotted)
                if target is None or target == path:
                    continue
                classes = frozenset({built}) if hops == 0 and kind == "half_model" and not target.endswith("__init__.py") else frozenset()
                passed = replace(evidence.via(f"imported at {short_path(path)}:{line}"), classes=classes)
                _reach(reached, target, passed, getattr(self.summaries[target], kind) is None)
                if (target, evidence.file) in seen_from:
                    continue
                seen_from.add((target, evidence.file))
                self._reaching[target] = self._reaching.get(target, frozenset()) | evidence.dtypes
                queue.append((target, passed, hops + 1))
        return reached

    def _trainer_autocast(self) -> dict[str, Evidence]:
        """Training files with no autocast of their own that build a class whose own methods enter one (a trainer):
        what they build besides it is run under the trainer's autocast (OLMo's and composer's scripts build the model
        and the `Trainer` whose step enters autocast). An autocast elsewhere in the class's file (a self-test at the
        bottom of a model file) is no part of the class. Only files whose imports the summaries hold already
        (training files that name a precision) are asked: reading every file's imports would cost a pass each."""
        out: dict[str, Evidence] = {}
        for path, summary in sorted(self.summaries.items()):
            if summary.autocast is not None or not summary.imports:
                continue
            for dotted, line in summary.imports:
                target = self.resolve(path, dotted)
                evidence = self.summaries[target].autocast if target is not None and target != path else None
                name = dotted.rpartition(".")[2]
                if evidence is not None and self._in_class(target, name, evidence.line):
                    out[path] = evidence.via(f"whose `{name}` {short_path(path)} builds (imported at line {line})")
                    break
        return out

    def _in_class(self, path: str, name: str, line: int) -> bool:
        """Is `line` of the file at `path` inside the body of its class `name`? (Each file parsed once: every training
        script that imports the trainer asks of the same file.)"""
        if path not in self._classes:
            text = self.text_of(path) if self.text_of is not None else None
            try:
                tree = ast.parse(text) if text is not None else None
            except (SyntaxError, ValueError):
                tree = None
            self._classes[path] = [(n.name, n.lineno, n.end_lineno or 0) for n in tree.body
                                   if isinstance(n, ast.ClassDef)] if tree is not None else []
        return any(n == name and first <= line <= last for n, first, last in self._classes[path])


def _reach(reached: dict[str, Evidence], target: str, passed: Evidence, open_: bool) -> None:
    """`passed` reaches `target`: the first evidence to reach a file is the one cited; the classes it reaches are
    those of every path that reaches it, all of the file as soon as one path reaches all of it."""
    held = reached.get(target)
    if held is None:
        if open_:
            reached[target] = passed
    elif held.classes:
        reached[target] = replace(held, classes=(held.classes | passed.classes) if passed.classes else frozenset())


def _code_names(text: str) -> frozenset[str]:
    """The identifiers of a file's code and its short strings as option names (``"--bf16"`` -> bf16): what an
    option the file declares or reads is spelled with, not what its comments and docstrings mention. A file the
    tokenizer cannot read names every word of its text."""
    out: set[str] = set()
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.NAME:
                out.add(token.string)
            elif token.type == tokenize.STRING and len(token.string) < 64:
                out.add(token.string.strip("\"'rbfuRBFU").lstrip("-").replace("-", "_"))
    except (tokenize.TokenError, SyntaxError, ValueError):
        return frozenset(re.findall(r"\w+", text))
    return frozenset(out)


def _trainer_signs(text: str, past_guards: bool) -> tuple[set[str], set[str]] | None:
    """For `ProjectModel._autocast_nowhere`: None where the text shows a sign of autocast (`AUTOCAST_SIGNS`) other
    than a ``...trainer(`` call (with `past_guards`, a guard that turns autocast off is none); else the trainer
    classes it calls and those it defines on no base class."""
    if past_guards and "enabled" in text:
        text = _GUARD.sub("", text)
    lowered = text.lower()
    called: set[str] = set()
    for sign in AUTOCAST_SIGNS.finditer(lowered):
        if sign["trainer"] is None:
            return None
        name = _IDENTIFIER_END.search(lowered, max(0, sign.start() - 200), sign.start()).group() + "trainer"
        if name == "trainer" and text[sign.start()] == "t":
            continue  # `trainer(0)`: an object the project made is called, no framework's class is built
        called.add(name)
    return called, {m.group(1) for m in _PLAIN_TRAINER_CLASS.finditer(lowered)}


def shipped_module(path: str, modules: Container[str], folders: Container[PurePosixPath]) -> bool:
    """In an installable package, is the module at `path` (below the project's top, as the paths of `modules`, the
    project's modules, are; `folders`: those that hold one directly) part of what it gives its users
    (`ProjectModel._shipped`)?"""
    folder = PurePosixPath(path).parent
    if folder == PurePosixPath("."):
        return True
    if f"{folder}/__init__.py" not in modules:
        return False
    while f"{folder}/__init__.py" in modules:
        folder = folder.parent
    return folder == PurePosixPath(".") or folder not in folders


def _unscaled_elsewhere(path: str, summary: Summary, unscaling: Sequence[str]) -> str:
    """`ProjectContext.unscaled_in` for the file at `path`: the first other file of `unscaling` (those that unscale),
    for a file that clips scaled gradients."""
    return next((p for p in unscaling if p != path), "") if summary.clips else ""


def _nearest_signs(path: str, summary: Summary, guards: Sequence[tuple[str, int]],
                   cpu: Mapping[str, int]) -> tuple[Evidence | None, Evidence | None]:
    """For the file at `path`: the other module of the project that turns autocast off around its own math (where
    the file may compute rotary angles), and the file that enters CPU autocast (where it reads autocast's state with
    no device); the nearest of each (its own package before an example or a test) is the one cited."""
    others = {p: line for p, line in guards if p != path} if summary.angles else {}
    other = _nearest(list(others), path) if others else None
    guarded = Evidence("autocast turned off around its own math in another module of this project", frozenset(),
                       other, others[other]) if other is not None else None
    near = _nearest(list(cpu), path) if cpu and summary.autocast_state else None
    return guarded, Evidence("autocast entered on the CPU", frozenset(), near, cpu[near]) if near is not None else None


def _nearest_device(path: str, summary: Summary, devices: Mapping[str, tuple[str, int]]) -> Evidence | None:
    """For a file that pins an fp32 autocast region to CUDA: the nearest other file of the project that runs code on
    another device (`ProjectModel._devices`); its own device is the detector's to read."""
    others = [p for p in devices if p != path] if summary.pins_cuda else []
    if not others:
        return None
    near = _nearest(others, path)
    what, line = devices[near]
    return Evidence(what, frozenset(), near, line)


def _nearest(paths: Sequence[str], to: str) -> str:
    """The path sharing the longest folder prefix with `to` (its own package before an example or a test), the
    shortest among equals."""
    here = _folders(to)
    return max(paths, key=lambda p: (_common(_folders(p), here), -len(p)))


@functools.lru_cache(maxsize=1 << 14)
def _folders(path: str) -> tuple[str, ...]:
    # asked of every candidate for every file of a project: parse each path once
    return PurePosixPath(path).parent.parts


def _common(a: Iterable[str], b: Iterable[str]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


# Without one of these words a training file sets up no precision for what it imports.
PRECISION_WORDS = ("autocast", "bfloat16", "float16", "bf16", "fp16", "half()", "mixed_precision", "precision=")


# What shows that a project's code may run under autocast: autocast itself (entered, decorated, or turned off around
# some math, which says the code expects it on), AMP flags, or a framework that enters it for the user from a
# launch flag or config (accelerate's `mixed_precision`, the HF and Lightning trainers and their `precision="..."`,
# mmengine's AmpOptimWrapper, a DeepSpeed config dict's apex "amp" block; DeepSpeed's own torch_autocast says
# "autocast", and its JSON configs are read as training configs). Read in the lowercased text, broad on purpose
# (`USE_AMP`, `SOLVER.AMP`, `amp_dtype`, `amp.GradScaler` all count), but none of these is a sign:
# - "amp" inside a longer word (`clamp_`, `clamp=`, `.amplitude`);
# - apex's fused-kernel module `amp_C` and torch's loss-scale kernels `_amp_foreach_non_finite_check_and_unscale_`,
#   `_amp_update_scale_`: fused optimizers and the hand-written loss scalers of models cast to fp16 call them;
# - DeepSpeed itself: its bf16/fp16 engines cast the model and enter no autocast;
# - `mixed_precision` inside a project's own identifier (`_add_mixed_precision_args`), and a `precision` that is
#   not given a literal mode (`precision=torch.half`, `self.precision = precision`, `precision == ...`): the dtype
#   of a model cast as often as an autocast mode;
# - a call of a ``...Trainer`` class that the project defines itself on no base class
#   (`ProjectModel._autocast_nowhere`): that is a loop of its own.
AUTOCAST_SIGNS = re.compile(
    r"autocast|custom_fwd|(?<![a-z_])mixed_precision(?!_?[a-z])|precision ?= ?(?:[\"']|16(?!\d))|[\"']amp[\"']"
    r"|\.amp(?![a-z])|_amp(?![a-z]|_foreach_non_finite|_update_scale)"
    r"|(?<![a-z])amp(?:[=.]|_(?!c(?![a-z])|foreach_non_finite|update_scale))|ampoptim"
    r"|accelerator|trainingarguments|fabric|lightning|composer|(?P<trainer>trainer)\(")
# Signs in a file's text that it casts a model to half or loads one in half: a loader's `torch_dtype`, FSDP's
# `param_dtype`, a default dtype set, a converter (`convert_to_fp16`, Megatron's `Float16Module`), a `bf16-true`
# precision, a DeepSpeed `"bf16": {...}` section, a half `dtype=` given to a constructor (not to autocast), and
# `.half()`/`.bfloat16()`/`.to(<half dtype or a dtype variable>)` on a receiver named as a model is
# (`MODEL_TOKENS`, `self`) or on a call's result (`Net().half()`; for `.to(`, only with a half dtype written out:
# `norm(x).to(x.dtype)` is an activation's cast). Casts of data (`mel.half()`, `x.to(dtype)`) are none.
_HALF_WEIGHTS = re.compile(
    r"torch_dtype|param_dtype|set_default_dtype|set_default_tensor_type|keep_in_fp32|(?:to|convert\w*)_(?:fp16|bf16|half)\b"
    r"|(?:fp16|float16|bf16|half)_?module|(?:bf)?16-true|[\"'](?:bf16|fp16|bfloat16)[\"']\s*:\s*\{"
    r"|(?P<keyword>[(,]\s*dtype\s*=\s*torch\.(?:bfloat16|float16|half)\b)"
    r"|(?<![\w.])(?P<receiver>[\w.]*\)?)\s*\.\s*(?:half|bfloat16)\s*\(\s*\)"
    r"|(?<![\w.])(?P<moved>[\w.]*\)?)\s*\.\s*to\s*\((?P<to>[^)]*?(?:bfloat16|float16|half|bf16|fp16|dtype))", re.I)
_HALF_WEIGHTS_GATES = ("half", "loat16", "dtype", "f16", "F16", "16-true")


_UNSCALE_CALL = re.compile(r"\.unscale_\(")
# A script's entry point: ``if __name__ == "__main__":``.
_MAIN_GUARD = re.compile(r"__name__\s*==\s*[\"']__main__[\"']")
# Words of the code whose findings depend on whether the weights can be half: a loss scaler, a decomposition or
# solve with no half kernel (AMP004's and AMP130's triggers).
_WEIGHTS_DTYPE_WORDS = ("GradScaler", "linalg", "torch.svd", "torch.qr", "torch.inverse", "torch.cholesky", "svd_lowrank",
                        "quantile", "triangular_solve", "geqrf")


def _clips_scaled(source: str | TextWords) -> bool:
    seen = text_and_words(source)[1]
    return "clip_grad" in seen and ".scale(" in seen


def _unscales(source: str | TextWords) -> bool:
    text, seen = text_and_words(source)
    return "unscale_" in seen and _UNSCALE_CALL.search(text) is not None


def half_weights_sign(source: str | TextWords) -> re.Match[str] | None:
    """The first sign in the text that the file makes a model's weights half (`_HALF_WEIGHTS`), or None."""
    text, seen = text_and_words(source)
    if not any(w in seen for w in _HALF_WEIGHTS_GATES):
        return None
    return next((m for m in _HALF_WEIGHTS.finditer(text) if _casts_a_model(m, text)), None)


def _casts_a_model(sign: re.Match[str], text: str) -> bool:
    if sign["keyword"] is not None:  # `dtype=torch.bfloat16` given to a constructor, not to an autocast on its line
        return "autocast" not in text[text.rfind("\n", 0, sign.start()) + 1: sign.start()].lower()
    receiver = sign["receiver"] if sign["receiver"] is not None else sign["moved"]
    if receiver is None:
        return True
    if not receiver or receiver.endswith(")"):
        return sign["receiver"] is not None or not sign["to"].lower().endswith("dtype")
    last = receiver.rsplit(".", 1)[-1]
    return last == "self" or bool(set(words(last)) & MODEL_TOKENS)


# ``class MixedPrecisionTrainer:`` or ``class LoopTrainer(object):``, in lowercased text.
_PLAIN_TRAINER_CLASS = re.compile(r"^[ \t]*class[ \t]+(\w*trainer)[ \t]*(?:\([ \t]*(?:object)?[ \t]*\))?[ \t]*:", re.M)
_IDENTIFIER_END = re.compile(r"\w*$")


# Argument parsers whose `--bf16`/`--fp16`/`--precision bf16-mixed` turn autocast on (the HF Trainer's arguments,
# TRL's, LightningCLI's trainer): a launch flag a script parses with one of them autocasts its run.
AUTOCAST_PARSERS = frozenset({"TrainingArguments", "Seq2SeqTrainingArguments", "HfArgumentParser", "TrlParser", "SFTConfig",
                              "DPOConfig", "GRPOConfig", "LightningCLI"})


def summarize(rel_path: str, source: str | TextWords, ctx: "Context | None", trains: bool, sensitive: bool = True) -> Summary:
    """The file's summary; `ctx` (the parsed file) is needed only for a training file that names a precision.
    `source`: the file's text, or its words (`words.TextWords`) where the caller looked for some already."""
    module = module_name(rel_path)
    text = text_and_words(source)[0]
    # A training file's imports are where its precision goes: read now. Any other file's are read by the model
    # only when the propagation reaches it (`ProjectModel.text_of`).
    imports = imports_of(text, module, rel_path.endswith("__init__.py")) if trains else ()
    if ctx is None or not trains:
        return Summary(rel_path, module, imports, guards=_autocast_guard(source), sensitive=sensitive, **_read_from_text(source))
    facts = ctx.facts
    autocast = half_model = None
    node, only_with = _first_made(facts, facts.half_autocasts)
    if node is not None:
        dtypes = _autocast_dtypes(ctx, node)
        named = isinstance(node, ast.Call) and ctx.qualname(node.func) in AUTOCASTS
        what = "autocast" if named else f"mixed precision (`{_callee(node)}`)"
        # a model this file casts to half, or shards with half parameters (FSDP's `MixedPrecision(param_dtype=...)`),
        # runs its autocast with half weights (`Evidence.casts_weights`)
        from ampdoctor.lint.python.embedded import half_weights_config  # the config readers: only for a file linted now, not from the cache
        casts = bool(facts.model_casts) or half_weights_config(ctx) is not None
        autocast = Evidence(f"{_names(dtypes)} {what}", dtypes, rel_path, node.lineno, casts_weights=casts, only_with=only_with or "",
                            device=facts.autocast_device(node) or "")
    model_classes: tuple[str, ...] = ()
    if autocast is None and facts.model_casts and not facts.mixed_precision_on:
        made, only_with = _first_made(facts, [c.node for c in facts.model_casts])
        cast = next(c for c in facts.model_casts if c.node is made)
        half_model = Evidence(f"a model cast to {_names(cast.dtypes)} without autocast", frozenset(cast.dtypes), rel_path, cast.node.lineno,
                              only_with=only_with or "")
        func = cast.node.func
        model_classes = facts.classes_of(func.value) if isinstance(func, ast.Attribute) else ()
    return Summary(rel_path, module, imports, autocast, half_model, model_classes, _config_names(ctx), sensitive=sensitive,
                   **_read_from_text(source))


def _read_from_text(source: str | TextWords) -> dict[str, object]:
    """The fields of every file's summary that its text tells, parsed or not."""
    return dict(angles=_may_compute_angles(source), cpu_autocast=cpu_autocast_line(source), autocast_state=_reads_autocast_state(source),
                helpers=apply_helpers(source), loop=runs_training_loop(source), pins_cuda=pins_cuda(source),
                functions=defines_function(source),
                clips=_clips_scaled(source), unscales=_unscales(source), script=runs_as_script(source),
                weights_dtype=any(w in text_and_words(source)[1] for w in _WEIGHTS_DTYPE_WORDS))


# The top-level test of a script's main block, either way round (read from the text: every file's summary has it,
# and a docstring that begins a line with it is rare enough).
_MAIN_GUARD = re.compile(r"^if[ \t(]+(?:__name__[ \t]*==[ \t]*['\"]__main__['\"]|['\"]__main__['\"][ \t]*==[ \t]*__name__)", re.M)


def runs_as_script(source: str | TextWords) -> bool:
    """Does the file run as a script: a main block at its top level?"""
    text = text_and_words(source)[0]
    return "__main__" in text and _MAIN_GUARD.search(text) is not None


def _first_made(facts: "Facts", nodes: Sequence[ast.AST]) -> tuple[ast.AST | None, str | None]:
    """The first of a training file's autocasts or model casts that some run the project makes of it enters, else
    the first, with the option only a run that sets it would take it under (`Facts.option_only`, `Evidence.only_with`).
    Among those, one in the code that trains comes before one in a validation or sampling block of the file
    (`kind.site_kind`): the evidence a finding cites says what training runs under, and no backward follows an
    autocast inside ``torch.no_grad()``."""
    entered = [(n, facts.option_only(n)) for n in nodes]
    training = Kind(CodeKind.TRAINING, "")
    entered.sort(key=lambda e: (e[1] is not None, site_kind(facts.src, e[0], training).kind is not CodeKind.TRAINING))  # stable
    return entered[0] if entered else (None, None)


# A class whose bases name `Function` (``class RoIAlign(Function):``, ``(torch.autograd.Function)``), from the text.
_FUNCTION_CLASS = re.compile(r"^[ \t]*class[ \t]+\w+[ \t]*\([^)]*\bFunction\b", re.M)


def defines_function(source: str | TextWords) -> bool:
    text, seen = text_and_words(source)
    return "Function" in seen and _FUNCTION_CLASS.search(text) is not None


# `torch.autocast(device_type, enabled=False)` (any spelling of autocast): read from the text, so that a file only
# summarised for context (`--project`) counts as well as one linted.
_GUARD = re.compile(r"autocast\([^()]*(?:\([^()]*\)[^()]*)*enabled\s*=\s*False")


def _autocast_guard(source: str | TextWords) -> int | None:
    text, seen = text_and_words(source)
    if "enabled" not in seen:
        return None
    m = _GUARD.search(text)
    return text.count("\n", 0, m.start()) + 1 if m else None


# Autocast entered on the CPU: "cpu" given to an autocast call, or the old `torch.cpu.amp.autocast`. Not a call
# that turns autocast off (`enabled=False`), nor one whose "cpu" is only compared against (`enabled=dev != "cpu"`):
# those keep CPU autocast off.
_AUTOCAST_CALL = re.compile(r"\b(cpu\.amp\.)?autocast\(((?:[^()]|\((?:[^()]|\([^()]*\))*\))*)\)")
_CPU_LITERAL = re.compile(r"""["']cpu["']""")
_DISABLED = re.compile(r"\benabled\s*=\s*False\b")


def cpu_autocast_line(source: str | TextWords) -> int | None:
    text, seen = text_and_words(source)
    if "cpu" not in seen or "autocast(" not in seen:  # what every match holds: most files have none, and the regex
        return None  # (whose first character may be any) costs a scan of the whole text
    for m in _AUTOCAST_CALL.finditer(text):
        args = m.group(2)
        if _DISABLED.search(args):
            continue
        if m.group(1) or (_CPU_LITERAL.search(args) and _cpu_given(args)):
            return text.count("\n", 0, m.start()) + 1
    return None


def _cpu_given(args: str) -> bool:
    """A "cpu" literal among an autocast call's arguments is passed (as the device type, or a branch of one), not
    only compared against; the text that cannot be parsed alone is taken as passing it."""
    try:
        call = ast.parse(f"f({args})", mode="eval")
    except (SyntaxError, ValueError):
        return True
    compared = {id(n) for c in ast.walk(call) if isinstance(c, ast.Compare) for n in ast.walk(c)}
    return any(isinstance(n, ast.Constant) and n.value == "cpu" and id(n) not in compared for n in ast.walk(call))


def _name_tokens(text: str, name: str) -> int:
    """How often `name` is written in the code of `text` (not its comments; strings count, `__all__` lists them);
    a text the tokenizer cannot read counts as naming it often."""
    word = re.compile(rf"\b{re.escape(name)}\b")
    try:
        return sum(1 for t in tokenize.generate_tokens(io.StringIO(text).readline)
                   if t.string == name or (t.type == tokenize.STRING and word.search(t.string)))
    except (tokenize.TokenError, SyntaxError, ValueError):
        return 2


# A module-level statement (a `def`, `class`, assignment, decorator...): where the body of the one before it ends.
# Not a closing bracket in the first column: the end of a signature or call written over several lines.
_TOP_LEVEL = re.compile(r"^(?:(def)[ \t]+(\w+)|[^\s#)\]}])", re.M)
_APPLY = re.compile(r"\b[A-Z]\w*\.apply\(")


def apply_helpers(source: str | TextWords) -> tuple[str, ...]:
    """The undecorated module-level functions whose body applies an autograd Function (``Cls.apply(``), read from
    the text (cheap, and only where a Function is applied at all): whether anything calls them is the project's
    question (`ProjectModel._unused_helpers`)."""
    text, seen = text_and_words(source)
    if ".apply(" not in seen or "Function" not in seen:
        return ()
    out = []
    starts = list(_TOP_LEVEL.finditer(text))
    for here, after in zip(starts, starts[1:] + [None]):
        if here.group(1) is None:
            continue
        before = text.rfind("\n", 0, max(0, here.start() - 1))
        if text[before + 1:here.start()].lstrip().startswith("@"):
            continue  # decorated: registered or wrapped, called by what it is handed to
        if _APPLY.search(text, here.end(), after.start() if after is not None else len(text)):
            out.append(here.group(2))
    return tuple(out)


# A device other than CUDA that code runs on, where the code picks it: given to `torch.device(...)` or `.to(...)`,
# bound to a name or keyword about devices, or chosen by a conditional; or the backend's own package imported
# (Ascend's torch_npu, Habana's, Intel's extension). Not a comparison (`x.device.type == "mps"`) nor an
# availability test: code that handles a device it may meet, as library code copied into a project does, without
# the project running there.
_OTHER_DEVICES = ("mps", "npu", "xpu", "hpu", "musa")
_DEVICE_NAME = re.compile(r"""["'](mps|npu|xpu|hpu|musa)(?::\d+)?["']""")
# What comes just before a device name that picks it (read back from the name, on its line: a regex that looked for
# these first would try each at every word of every file), and what comes just after one.
_PICKED_BY = re.compile(r"(?:torch\.device\(\s*|\.to\(\s*(?:device\s*=\s*)?|device\w*\s*=\s*|\breturn\s+|\belse\s+)$", re.I)
_PICKS = re.compile(r"[ \t]+if\b")  # on the same line: `"mps" if ... else`, not a next line that starts with `if`
_BACKENDS = ("torch_npu", "habana_frameworks", "intel_extension_for_pytorch", "torch_musa")
_BACKEND_IMPORT = re.compile(rf"^[ \t]*(?:import|from)[ \t]+({'|'.join(_BACKENDS)})\b", re.M)
_DEVICE_LABEL = {"mps": "Apple MPS", "npu": "an NPU", "xpu": "Intel XPU", "hpu": "Habana HPU", "musa": "MUSA",
                 "torch_npu": "an NPU", "habana_frameworks": "Habana HPU", "intel_extension_for_pytorch": "Intel XPU",
                 "torch_musa": "MUSA"}


def other_device_line(text: str) -> tuple[str, int] | None:
    """The first device other than CUDA the code of `text` picks to run on, as (what, line): a device name given to
    `torch.device(...)` or `.to(...)`, bound to a name or keyword about devices (not compared with one), returned or
    chosen by a conditional; or the backend's own package imported. Lines that are comments do not count."""
    if not any(d in text for d in _OTHER_DEVICES):  # most files name none: skip the scans
        return None
    found = []
    for m in _DEVICE_NAME.finditer(text):
        start = text.rfind("\n", 0, m.start()) + 1
        before = text[start:m.start()]
        if before.lstrip().startswith("#"):
            continue
        if _PICKED_BY.search(before[-80:]) or _PICKS.match(text, m.end()):
            found.append((m.start(), m.group(1)))
            break
    if any(b in text for b in _BACKENDS):
        imported = _BACKEND_IMPORT.search(text)
        if imported:
            found.append((imported.start(), imported.group(1)))
    if not found:
        return None
    at, name = min(found)
    return _DEVICE_LABEL[name], text.count("\n", 0, at) + 1


# `torch.autocast("cuda", dtype=torch.float32)`, any spelling of autocast (not `register_autocast(...)`, which
# registers an op's autocast rule): a region pinned to CUDA that keeps fp32.
_PINNED = re.compile(r"""(?<!\w)autocast\((?=[^()]*["']cuda["'])(?=[^()]*torch\.float(?:32)?\b)""")


def pins_cuda(source: str | TextWords) -> bool:
    text, seen = text_and_words(source)
    return "autocast" in seen and _PINNED.search(text) is not None


def _reads_autocast_state(source: str | TextWords) -> bool:
    return "is_autocast_enabled()" in text_and_words(source)[1]


def _may_compute_angles(source: str | TextWords) -> bool:
    seen = text_and_words(source)[1]
    return "freq" in seen and any(w in seen for w in ("@", "matmul", "einsum", "mm("))


_CONFIG_SUFFIXES = (".json", ".yaml", ".yml", ".toml")


def _config_names(ctx: "Context") -> tuple[tuple[str, int], ...]:
    """Config files a training script names (``open("ds_config.json")``, a default ``--config`` path): the run it
    makes is configured by them."""
    return tuple((name, const.lineno) for const in ctx.src.strings if (name := config_name(const.value)) is not None)


def config_name(value: object) -> str | None:
    """The file name of a config file a string names (``"configs/ds_config.json"`` -> ``ds_config.json``)."""
    if not isinstance(value, str):
        return None
    value = value.strip()
    if value.lower().endswith(_CONFIG_SUFFIXES) and len(value) < 200 and "\n" not in value:
        return PurePosixPath(value).name
    return None


def _autocast_dtypes(ctx: "Context", node: ast.AST) -> frozenset[str]:
    """The half dtypes an autocast runs in: the one it names; none known for one that names none (its default
    depends on the device) or one the run chooses (`dtype=cfg.precision`), since which of them a project's runs use
    is for its configs to say; for a framework's mixed precision, those its settings may choose (both where they do
    not say)."""
    name = ctx.qualname(node.func) if isinstance(node, ast.Call) else None
    if name in AUTOCASTS:
        found = ctx.flow.dtype_of(autocast_argument(node, name, "dtype"))
        return frozenset(found & HALF) if found else frozenset()
    return (ctx.facts.framework_half_dtypes(node) if isinstance(node, ast.Call) else frozenset()) or frozenset(HALF)


def _callee(node: ast.AST) -> str:
    func = node.func if isinstance(node, ast.Call) else node
    return ast.unparse(func)[:40] + "(...)"


def _names(dtypes: frozenset[str]) -> str:
    return "/".join(sorted(dtypes)) if dtypes else "half"


# What a file an installable package ships stands for (`ProjectContext.shipped`): its users' precision, which no word
# of the package names. An identifier no source holds, asked only by the detectors that judge code for those users.
SHIPPED_WORD = "ampdoctor_shipped_package_code"


def project_words(project: ProjectContext | None) -> str:
    """Words the file would contain had it set its precision itself: a detector that waits for such a word (an
    autocast, a half dtype) runs on a file that a training file's context reaches."""
    if not project:
        return ""
    words = [f" {SHIPPED_WORD}"] if project.shipped else []
    if project.autocast is not None or project.guarded is not None:
        words.append(" autocast mixed_precision")
    if project.autocast is not None or project.half_model is not None or project.half is not None:
        words.append(" bfloat16 float16 .half() bf16\" fp16\"")
    return "".join(words)


def _template(path: str) -> bool:
    """A file of a project-generation template (cookiecutter, copier): a folder or file name with a ``{{ ... }}``
    placeholder (``templates/{{cookiecutter.name}}/modeling_{{cookiecutter.lowercase_name}}.py``). It is not Python
    until rendered into a file of another name, so as it stands it compiles to nothing and runs nothing."""
    return "{{" in path and "}}" in path
