"""Findings in code the project carries but does not run: a module-level class nothing builds or function nothing
calls, and code that runs only with an option that is off by default and that nothing in the project turns on.

A definition is unused where its own file names it only inside itself or inside other unused definitions, no other
file takes it from its module, no config or launcher names it, and its module is not imported by a name in a string
(``importlib.import_module("models.video")``). Only in a module the project runs (a script, or one another file
imports: a module nothing imports is judged as code of its own) of a project that runs scripts of its own (a folder
of modules alone is used by code outside it), and never for a decorated definition (a registry builds it by name, a framework
calls it) or a public one that an installable package gives its users. Such a finding is a note that names it.

Guided-diffusion's UNet blocks recompute through their own checkpoint Function only with ``use_checkpoint=True``,
a constructor parameter that defaults to False; a trainer enters its autocast only when a `peft_config` it
defaults to None is given. Where no call of the project passes such a parameter anything but a false literal, no
statement sets it, no config or launcher of the project writes its key and no string names it (an argparse flag,
a dict key), the finding is a defect of code the project carries but does not run: a note, which says so.

The guard is read from the finding's own file: an ``if``/conditional expression over a parameter whose default is
False, None or 0 (or ``self.x`` stored from one); a parameter of a module-level helper with no default, where every
call of the helper in the project passes such an option; an option of the file's own argument parser read as
``args.x``, a ``store_true`` flag or one whose default is off (an ``add_argument`` that defines it off names it
without turning it on); and, for code inside an autograd Function, every ``Cls.apply(...)`` of it so guarded. The
project is searched only for a finding with such a guard (read lazily, once per project), and anything it cannot
place (a name passed on, an unparsed file naming the option) keeps the finding as it is."""

from __future__ import annotations

import ast
import importlib.util
import re
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Callable, Iterable, Iterator, Sequence

from ampdoctor.core.model import Finding, Severity
from ampdoctor.lint.python.kind import CodeKind, file_kind
from ampdoctor.lint.python.project import from_import_statements, runs_as_script, shipped_module
from ampdoctor.lint.python.resolve import argument, is_dataclass, keyword, self_attribute
from ampdoctor.lint.python.source import SourceFile

# The rules whose findings concern how a run is set up: an autocast region, a recompute, the dtype gradients are
# reduced in (a parallelism strategy's policy, picked by a launch option or offered by a policies module).
OPTION_RULES = frozenset({"AMP107", "AMP118", "AMP134"})
# Attributes a framework's base class sets, true only when its constructor is given a parameter: TRL's trainers
# cast a peft model to bf16 (and enter their autocast) only for a `peft_config` they are given.
INHERITED = {"_peft_has_been_casted_to_bf16": "peft_config"}
# How many helpers deep a guard is followed (a Function applied in a helper that a block calls under its option).
_MAX_DEPTH = 2
_FALSE_WORDS = frozenset({"false", "none", "null", "0", "no", "off", "~"})
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_DEFINITIONS = (ast.ClassDef, *_FUNCTIONS)


@dataclass(frozen=True)
class Option:
    """A parameter that turns the code on, and where its default says off."""

    name: str
    default: str  # "False", "None", "0"
    file: str
    line: int
    via: str = ""  # how the guard follows it, where it reads another name: "a base class sets `self.x` only for it"
    flag: str = ""  # the command-line flag, for an option of the file's own argument parser ("--use_amp")
    # For an option that holds a string (``--strategy``, default "auto"), the values the guard compares it to
    # (``args.strategy == "fsdp"``): it is on only where the project passes one of them.
    values: tuple[str, ...] = ()


def _node_at(mod: SourceFile, line: int | None, column: int | None) -> ast.AST | None:
    """The innermost expression that starts at the finding's place (its column 1-based), short of a bare name or
    attribute: the call of ``amp.autocast("cuda") if x else nullcontext()``, not the conditional it begins; the
    name or attribute where the finding is at one (``reduce_dtype=torch.bfloat16``)."""
    if line is None:
        return None
    at = [n for n in ast.walk(mod.tree) if getattr(n, "lineno", None) == line and isinstance(n, ast.expr)
          and (column is None or n.col_offset == column - 1)]
    found = [n for n in at if not isinstance(n, (ast.Name, ast.Attribute))] or at  # a finding at a name: the name
    return found[-1] if found else None


def _false(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and not isinstance(node.value, str) and not node.value


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> list[tuple[ast.arg, ast.expr | None, int | None]]:
    """Each parameter with its default and its position among the positional ones (None for keyword-only)."""
    args = fn.args
    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    out = [(a, d, i) for i, (a, d) in enumerate(zip(positional, defaults))]
    out += [(a, d, None) for a, d in zip(args.kwonlyargs, args.kw_defaults)]
    return out + [(a, None, None) for a in (args.vararg, args.kwarg) if a is not None]


class ProjectOptions:
    """The options of one project's files and whether anything in the project turns them on. `files`: the project's
    Python files; `configs`: its config files and shell launchers (their text is searched for the option's key)."""

    def __init__(self, files: Sequence[str], configs: Sequence[str] = (), rel: Callable[[str], str] = str, docs: Sequence[str] = (),
                 packaged: bool = False, scripts: Sequence[str] | None = None) -> None:
        self.files, self.configs, self.rel, self.docs, self.packaged = list(files), list(configs), rel, list(docs), packaged
        self._texts: dict[str, str | None] = {}
        self._parsed: dict[str, SourceFile | None] = {}
        self._on: dict[str, str | None] = {}
        self._dead: dict[str, frozenset[str]] = {}
        self._modules: frozenset[str] | None = None
        self._folders: frozenset[PurePosixPath] = frozenset()
        # the files that run as scripts, where the caller knows them (their summaries say so): none is read for it
        self._scripts: bool | None = None if scripts is None else any(file_kind(rel(f), "").kind is not CodeKind.TEST for f in scripts)

    def text(self, path: str) -> str | None:
        if path not in self._texts:
            try:
                self._texts[path] = importlib.util.decode_source(Path(path).read_bytes())
            except (OSError, UnicodeDecodeError, SyntaxError, LookupError):
                self._texts[path] = None
        return self._texts[path]

    def parsed(self, path: str) -> SourceFile | None:
        if path not in self._parsed:
            text = self.text(path)
            try:
                self._parsed[path] = SourceFile.parse(path, text) if text is not None else None
            except (SyntaxError, ValueError, RecursionError):
                self._parsed[path] = None
        return self._parsed[path]

    def judged(self, found: Finding) -> Finding:
        """The finding, a note if the code it concerns is code nothing in the project runs (`_unused_definition`) or,
        for a rule about how a run is set up, runs only with options nothing in the project turns on."""
        if found.severity is Severity.INFO or found.location.file is None or not found.location.file.endswith(".py"):
            return found
        mod = self.parsed(found.location.file)
        node = _node_at(mod, found.location.line, found.location.column) if mod is not None else None
        dead = self._unused_definition(mod, node) if node is not None else None
        if dead is not None:
            kind = "builds" if isinstance(dead, ast.ClassDef) else "calls"
            return replace(found, severity=Severity.INFO, details={**found.details, "unused": dead.name},
                           message=f"{found.message}; nothing in this project {kind} `{dead.name}` (line {dead.lineno}), "
                                   "and no installable package gives it to users: code the project carries but does not run")
        if found.rule_id not in OPTION_RULES:
            return found
        unused = self._unused_constant(mod, node) if node is not None else None
        if unused is not None:
            return replace(found, severity=Severity.INFO, details={**found.details, "unused": unused},
                           message=f"{found.message}; `{unused}` is a module-level value that nothing in this project names: "
                                   "one the project offers, not one its runs use")
        options = self._guards(mod, node, 0) if node is not None else None
        if not options or any(self.turned_on(o) for o in options):
            return found
        return replace(found, severity=Severity.INFO, message=found.message + "; " + _said(options, self.rel),
                       details={**found.details, "option_off": sorted({o.name for o in options})})

    def _unused_constant(self, mod: SourceFile, node: ast.AST) -> str | None:
        """The name of the module-level assignment whose value holds `node` (``bfSixteen = MixedPrecision(...)``),
        where neither its file past that assignment nor any other file of the project names it (`_names`: in its
        code, or a string that is the name; a log message or a comment that mentions it uses nothing); None
        otherwise."""
        stmt = next((c for p, c in mod.steps(node) if p is mod.tree), None)
        if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
            return None
        name = stmt.targets[0].id
        if _names(mod, name, stmt.targets[0]):
            return None
        for path, other in self._naming(name):
            if path != mod.path and (other is None or _names(other, name)):
                return None
        return name

    def _unused_definition(self, mod: SourceFile, node: ast.AST) -> ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef | None:
        """The module-level class or function that holds `node`, where nothing the project runs builds or calls it
        (`_unused_definitions`); None otherwise."""
        top = next((c for p, c in mod.steps(node) if p is mod.tree), None)
        if not isinstance(top, _DEFINITIONS) or top.name not in self._unused_definitions(mod):
            return None
        return top

    def _unused_definitions(self, mod: SourceFile) -> frozenset[str]:
        """The module-level classes and functions of `mod` that nothing in the project builds or calls: its own
        file names them (in code, or a string that is just the name) only inside themselves or inside other such
        definitions, no other file of the project takes them from this module, and no config or launcher names them.
        Not a decorated one (a registry builds it by name, a framework calls it), one with a metaclass or other class
        keywords (which may register it), nor a public one of a module an installable package gives its users."""
        if mod.path in self._dead:
            return self._dead[mod.path]
        if not self._runs_scripts() or self._imported_by_name(mod.path) or not self._run_module(mod):
            self._dead[mod.path] = frozenset()
            return self._dead[mod.path]
        defined = {n.name: n for n in mod.tree.body if isinstance(n, _DEFINITIONS)}
        named_by = _named_by(mod, defined)
        candidates = {name for name, d in defined.items()
                      if not d.decorator_list and not getattr(d, "keywords", ()) and not self._given_to_users(mod.path, name)
                      and None not in named_by[name]}
        dead: set[str] = set()
        grown = True
        while grown:
            more = {name for name in candidates - dead if named_by[name] <= dead and not self._named_elsewhere(mod.path, name)}
            grown = bool(more)
            dead |= more
        self._dead[mod.path] = frozenset(dead)
        return self._dead[mod.path]

    def _runs_scripts(self) -> bool:
        """Does the project run anything itself: a script of it (``if __name__ == "__main__":``) outside its tests?
        A folder of modules alone (a model library linted by itself) is used by code that is not in it."""
        if self._scripts is None:
            texts = ((f, self.text(f)) for f in self.files)
            self._scripts = any(text is None or runs_as_script(text) and file_kind(self.rel(f), text).kind is not CodeKind.TEST
                                for f, text in texts)
        return self._scripts

    def _run_module(self, mod: SourceFile) -> bool:
        """Is the module one the project runs: a script, or one another file imports? A module nothing imports (a
        snippet beside the project's scripts, an example to copy, work not wired in yet) is judged as code of its own,
        by its own findings: what it defines unused there is its reader's to run."""
        if runs_as_script(mod.text):
            return True
        stem = PurePosixPath(mod.path).stem
        module = PurePosixPath(mod.path).parent.name if stem == "__init__" else stem
        word = re.compile(rf"\b{re.escape(module)}\b")
        for path in self.files:
            text = self.text(path) if path != mod.path else ""
            if text is None:
                return True
            if module in text and word.search(text) and any(module in stmt for stmt in _import_lines(text)):
                other = self.parsed(path)
                if other is None or _imports_module(path, _import_statements(other), mod.path):
                    return True
        return False

    def _imported_by_name(self, path: str) -> bool:
        """Does another file, config or launcher of the project name the module at `path` to import it by that name
        (``importlib.import_module("models.video")``, ``--model models/video.py``, ``_target_: models.video.X``): its
        dotted name from two parts up (in a Python file, where a string begins: an import statement names it too)
        or its path, or the bare name in quotes for a module at the top?"""
        parts = PurePosixPath(self.rel(path)).with_suffix("").parts
        tails = [parts[i:] for i in range(len(parts) - 1)]
        paths = ["/".join(t) for t in tails]
        dotted = [".".join(t) for t in tails]
        quoted = [q + d for d in dotted or parts[-1:] for q in "\"'"]
        code = [*paths, *quoted]
        config = [*paths, *dotted] or quoted
        return any(text is None or any(n in text for n in code)
                   for text in (self.text(f) for f in self.files if f != path)) \
            or any(text is None or any(n in text for n in config) for text in map(self.text, self.configs))

    def _given_to_users(self, path: str, name: str) -> bool:
        """Is `name` public in a module of an installable package that its users import (`shipped_module`)?"""
        if not self.packaged or name.startswith("_"):
            return False
        if self._modules is None:
            self._modules = frozenset(self.rel(f) for f in self.files)
            self._folders = frozenset(PurePosixPath(m).parent for m in self._modules)
        return shipped_module(self.rel(path), self._modules, self._folders)

    def _named_elsewhere(self, path: str, name: str) -> bool:
        """Does another file of the project take `name` from the module at `path` (`_imports_name`), or a config or
        launcher of the project name it (a class a config builds by its name or dotted path)?"""
        # the texts first: `_imports_name` parses a file only where an import of it may name `name`
        if any(other != path and self._imports_name(other, name, path) for other in self._named_in(name, self.files)):
            return True
        return next(self._named_in(name, self.configs), None) is not None

    def _naming(self, name: str) -> Iterator[tuple[str, SourceFile | None]]:
        """The project's files whose text holds `name` as a word, or cannot be read, each with its parse (None: it
        cannot be read or parsed, and may name it)."""
        return ((path, self.parsed(path)) for path in self._named_in(name, self.files))

    def _named_in(self, name: str, paths: Sequence[str]) -> Iterator[str]:
        """Those of `paths` whose text holds `name` as a word, or cannot be read (and may)."""
        word = re.compile(rf"\b{re.escape(name)}\b")
        for path in paths:
            text = self.text(path)
            if text is None or (name in text and word.search(text)):
                yield path

    def _written(self, paths: Sequence[str], pattern: re.Pattern[str], accept: Callable[[str], bool] | None = None) -> str | None:
        """Where (`file:line`) the first match of `pattern` in the texts of `paths` lies whose first group `accept`
        takes (any match, without it)."""
        for path in paths:
            text = self.text(path) or ""
            for m in pattern.finditer(text):
                if accept is None or accept(m.group(1)):
                    return f"{self.rel(path)}:{text.count(chr(10), 0, m.start()) + 1}"
        return None

    # --- the guard, in the finding's file --------------------------------------------------------------------

    def _guards(self, mod: SourceFile, node: ast.AST, depth: int) -> list[Option] | None:
        """Options that, all off, keep `node` from running; None when it is not known to be guarded so: a branch
        over one that holds it, an early ``if not x: return`` before it, and past its function, every call of that
        function (a private one, or an autograd Function's ``apply``) so guarded."""
        for parent, child in mod.steps(node):
            found = self._branch(mod, parent, child, depth)
            if found is not None:
                return found
            if isinstance(parent, _FUNCTIONS):
                return self._callers_guarded(mod, parent, depth + 1) if depth < _MAX_DEPTH else None
            if isinstance(parent, (ast.ClassDef, ast.Lambda)):
                return None
        return None

    def _branch(self, mod: SourceFile, parent: ast.AST, child: ast.AST, depth: int) -> list[Option] | None:
        """The options `parent` needs on to run `child`: its side of a branch, or an ``if not x: return`` before it."""
        if isinstance(parent, (ast.If, ast.IfExp)) and child is not parent.test:
            body = parent.body if isinstance(parent.body, list) else [parent.body]
            found = self._test(mod, parent.test, any(child is b for b in body), parent, depth)
            if found is not None:
                return found
        block = next((b for b in (getattr(parent, f, None) for f in ("body", "orelse")) if isinstance(b, list) and child in b), None)
        for before in block[:block.index(child)] if block is not None else ():
            if isinstance(before, ast.If) and not before.orelse and isinstance(before.body[-1], (ast.Return, ast.Raise)):
                found = self._test(mod, before.test, False, before, depth)
                if found is not None:
                    return found
        return None

    def _callers_guarded(self, mod: SourceFile, fn: ast.FunctionDef | ast.AsyncFunctionDef, depth: int) -> list[Option] | None:
        """The options guarding every run of `fn`: each ``Cls.apply(...)`` of the autograd Function it is a method of,
        or each call of it where it is private (``self._amp_step(...)`` in its class, ``_helper(...)`` in its file and
        imported by no other)."""
        owner = mod.parents.get(fn)
        if isinstance(owner, ast.ClassDef) and _is_function_class(owner):
            return self._applied(mod, owner, depth)
        if not fn.name.startswith("_") or fn.name.startswith("__"):
            return None
        if not isinstance(owner, ast.ClassDef) and any(self._imports_name(p, fn.name, mod.path) for p in self.files if p != mod.path):
            return None
        out: list[Option] = []
        for ref in (n for n in ast.walk(mod.tree) if (n.id if isinstance(n, ast.Name) else getattr(n, "attr", None)) == fn.name):
            call = mod.parents.get(ref)
            is_self = self_attribute(ref) is not None
            if not (isinstance(call, ast.Call) and call.func is ref and is_self == isinstance(owner, ast.ClassDef)):
                return None
            found = self._guards(mod, call, depth)
            if found is None:
                return None
            out += found
        return out or None

    def _test(self, mod: SourceFile, test: ast.expr, in_body: bool, at: ast.AST, depth: int) -> list[Option] | None:
        """The options a branch's test needs on for the side that holds the node (the body of ``if x``/``if a and x``,
        the ``else`` of ``if not x``)."""
        if not in_body:
            return self._value(mod, test.operand, at, depth) if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) else None
        terms = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
        for term in terms:
            found = self._value(mod, term, at, depth)
            if found is not None:
                return found
        return None

    def _value(self, mod: SourceFile, expr: ast.expr, at: ast.AST, depth: int) -> list[Option] | None:
        """The options whose being off makes `expr` (read at `at`) false: an option of the file's own argument parser
        read as ``args.x`` that defaults off (`_flag_off`) or compared with a value its default is not
        (`_compared_off`), a parameter of the enclosing function that defaults off
        (or that every caller of a module-level helper passes off), or ``self.x`` stored from one in its class."""
        own = _parser_option_off(mod, expr)
        if own is not None or isinstance(expr, ast.Compare):
            return [own] if own is not None else None
        fn = next((p for p, _ in mod.steps(at) if isinstance(p, _FUNCTIONS)), None)
        if fn is None:
            return None
        if isinstance(expr, ast.Name):
            param = next(((a, d, i) for a, d, i in _params(fn) if a.arg == expr.id), None)
            if param is None:
                return None
            arg, default, index = param
            if default is not None:
                return [_option(mod, arg, default)] if _false(default) else None
            return self._passed_off(mod, fn, arg.arg, index, depth) if mod.parents.get(fn) is mod.tree else None
        if self_attribute(expr) is not None:
            owner = next((p for p, _ in mod.steps(fn) if isinstance(p, ast.ClassDef)), None)
            return _stored_off(mod, owner, expr.attr) if owner is not None else None
        return None

    def _applied(self, mod: SourceFile, cls: ast.ClassDef, depth: int) -> list[Option] | None:
        """The options every ``Cls.apply(...)`` of an autograd Function is guarded by; None if one is not, if the
        Function is named otherwise in its file, or named in another file of the project."""
        if any(self._imports_name(p, cls.name, mod.path) for p in self.files if p != mod.path):
            return None
        out: list[Option] = []
        for name in (n for n in ast.walk(mod.tree) if isinstance(n, ast.Name) and n.id == cls.name):
            attr = mod.parents.get(name)
            call = mod.parents.get(attr) if isinstance(attr, ast.Attribute) and attr.attr == "apply" else None
            guarded = self._guards(mod, call, depth) if isinstance(call, ast.Call) and call.func is attr else None
            if guarded is None:
                return None
            out += guarded
        return out or None

    def _imports_name(self, path: str, name: str, defining: str) -> bool:
        """Does the file at `path` take `name` from the module at `defining` (by name, or as ``module.name``)? One
        that cannot be read or parsed and names it may."""
        text = self.text(path)
        if text is not None and name not in text:
            return False
        if text is not None and f"{PurePosixPath(defining).stem}.{name}" not in text \
                and not any(name in stmt or "*" in stmt for stmt in from_import_statements(text)):
            return False  # named, but in no import and not as the module's attribute: no parse needed to say so
        other = self.parsed(path)
        if other is None:
            return True
        by_name, by_module = _takes_from(path, _import_statements(other), name, defining)
        return by_name or (by_module and f"{PurePosixPath(defining).stem}.{name}" in (text or ""))

    def _passed_off(self, mod: SourceFile, fn: ast.FunctionDef | ast.AsyncFunctionDef, param: str, index: int | None,
                    depth: int) -> list[Option] | None:
        """For a parameter of a module-level helper with no default: the options that every call of the helper in
        the project passes for it (a false literal needs none); None where a call passes anything else, or the
        helper is named other than called."""
        if depth >= _MAX_DEPTH:
            return None
        stem = PurePosixPath(mod.path).stem
        out: list[Option] = []
        for path in self.files:
            text = self.text(path)
            if text is None or fn.name not in text:
                continue
            other = self.parsed(path)
            if other is None:
                return None
            by_name, by_module = (True, False) if other is mod else _takes_from(path, _import_statements(other), fn.name, mod.path)
            if not (by_name or by_module):
                continue
            for call in _sites(other, fn, by_name, stem):
                if call is None:
                    return None
                value = argument(call, index, param) if index is not None else keyword(call, param)
                found = [] if _false(value) else self._value(other, value, call, depth + 1) if value is not None else None
                if found is None:
                    return None
                out += found
        return out or None

    # --- the project ----------------------------------------------------------------------------------------

    def turned_on(self, option: Option) -> str | None:
        """Where the project turns `option` on, or may (a value it passes or stores, a string naming it, a call that
        passes it by position, a config or launcher writing it, a file that cannot be parsed naming it); None when
        nothing does."""
        key = option.name if not option.values else f"{option.name}={'|'.join(option.values)}"
        if key not in self._on:
            if option.values:
                found = self._find_value(option.name, frozenset(option.values))
            else:
                owners: set[tuple[str, int]] = set()
                found = self._find_on(option.name, owners) or next((w for o in sorted(owners) if (w := self._positional(*o))), None)
            self._on[key] = found or self._documented(option)
        return self._on[key]

    def _documented(self, option: Option) -> str | None:
        """Where the project's README tells its users to run with the option (``--use_fsdp``, ``--strategy fsdp``): a
        run the project documents is one of its runs, though no launcher of it makes that run."""
        spellings = "|".join(re.escape(n) for n in dict.fromkeys((option.name, option.name.replace("_", "-"))))
        value = rf"""[ \t=]+["']?(?:{"|".join(re.escape(v) for v in option.values)})(?![\w-])""" if option.values else r"(?![\w-])"
        return self._written(self.docs, re.compile(rf"(?<![\w-])--(?:{spellings}){value}"))

    def _find_value(self, name: str, values: frozenset[str]) -> str | None:
        """Where the project gives the string option `name` one of `values`, or may: a keyword, an attribute store or
        a dict entry of that name whose value is one of them or not a literal (and not the option passed on), a
        string naming its flag outside its own definition, a config or launcher writing one of them or a value it
        cannot read (a shell variable); None when nothing does."""
        for path, mod in self._naming(name):
            line = _gives_value(mod, name, values) if mod is not None else 1
            if line is not None:
                return f"{self.rel(path)}:{line}"
        spelled = re.compile(rf"""(?<!\w)(?<!\w-)(?:{re.escape(name)}|{re.escape(name.replace("_", "-"))})\b["']?[ \t]*[:=\s][ \t]*["']?([\w.~$-]*)""")
        return self._written(self.configs, spelled, lambda v: v in values or not v or v.startswith("$"))

    def _positional(self, owner: str, index: int) -> str | None:
        """A call of the function (or class) `owner` that passes as many positional arguments as reach the place
        `index`, or a star argument."""
        for path in self.files:
            text = self.text(path)
            if text is not None and owner not in text:
                continue
            mod = self.parsed(path)
            if mod is None:
                return f"{self.rel(path)}:1"
            for call in (n for n in ast.walk(mod.tree) if isinstance(n, ast.Call)):
                name = call.func.id if isinstance(call.func, ast.Name) else getattr(call.func, "attr", None)
                if name == owner and (len(call.args) > index or any(isinstance(a, ast.Starred) for a in call.args)):
                    return f"{self.rel(path)}:{call.lineno}"
        return None

    def _find_on(self, name: str, owners: set[tuple[str, int]]) -> str | None:
        """What `turned_on` finds by the option's name; `owners` gets each function (or class) that takes it as a
        parameter, with its place, for the calls that may pass it by position."""
        for path, mod in self._naming(name):
            line = _sets(mod, name) if mod is not None else 1
            if line is not None:
                return f"{self.rel(path)}:{line}"
            owners.update(_owners(mod, name))
        spelled = re.compile(rf"""(?:{re.escape(name)}|{re.escape(name.replace("_", "-"))})\b["']?\s*[:=\s]?\s*["']?([\w.~-]*)""")
        return self._written(self.configs, spelled, lambda v: v.lower() not in _FALSE_WORDS)


def _is_function_class(cls: ast.ClassDef) -> bool:
    return any(ast.unparse(b).rpartition(".")[2] == "Function" for b in cls.bases)


def _stored_off(mod: SourceFile, cls: ast.ClassDef, attr: str) -> list[Option] | None:
    """``self.attr`` of class `cls`: every store of it in the class is a parameter of its method that defaults off
    (``self.use_checkpoint = use_checkpoint``) or a false literal; an attribute the class never stores that a
    framework base sets from a constructor parameter (`INHERITED`) follows that parameter."""
    out: list[Option] = []
    stores = [n for n in ast.walk(cls) if isinstance(n, ast.Attribute) and n.attr == attr and isinstance(n.ctx, ast.Store)]
    for target in stores:
        found = _store_option(mod, target)
        if found is None:
            return None
        out += found
    if not stores and attr in INHERITED:
        init = next((n for n in cls.body if isinstance(n, _FUNCTIONS) and n.name == "__init__"), None)
        param = next((p for p in _params(init) if p[0].arg == INHERITED[attr]), None) if init is not None else None
        if init is not None and param is not None and _false(param[1]):
            out.append(_option(mod, param[0], param[1], via=f"the base class of `{cls.name}` sets `self.{attr}` only for it"))
    return out or None


def _store_option(mod: SourceFile, target: ast.Attribute) -> list[Option] | None:
    """The option one store of ``self.attr`` takes its value from (none for a false literal); None for any other."""
    assign = mod.parents.get(target)
    fn = next((p for p, _ in mod.steps(target) if isinstance(p, _FUNCTIONS)), None)
    if not isinstance(assign, ast.Assign) or fn is None or self_attribute(target) is None:
        return None
    if _false(assign.value):
        return []
    name = assign.value.id if isinstance(assign.value, ast.Name) else None
    param = next((p for p in _params(fn) if p[0].arg == name), None)
    return [_option(mod, param[0], param[1])] if param is not None and _false(param[1]) else None


def _option(mod: SourceFile, arg: ast.arg, default: ast.expr | None, via: str = "") -> Option:
    return Option(arg.arg, ast.unparse(default) if default is not None else "None", mod.path, arg.lineno, via)


def _owners(mod: SourceFile, name: str) -> Iterable[tuple[str, int]]:
    """The functions of a file that take the parameter `name` at a positional place, each as a call names it (the
    class, for an ``__init__``) with that place among the arguments the call passes (a method's first is bound)."""
    for fn in (n for n in ast.walk(mod.tree) if isinstance(n, _FUNCTIONS)):
        index = next((i for a, _, i in _params(fn) if a.arg == name and i is not None), None)
        if index is None:
            continue
        cls = mod.parents.get(fn)
        method = isinstance(cls, ast.ClassDef) and not any(ast.unparse(d) == "staticmethod" for d in fn.decorator_list)
        owner = cls.name if isinstance(cls, ast.ClassDef) and method and fn.name == "__init__" else fn.name
        yield owner, index - method


def _takes_from(importer: str, statements: Sequence[ast.stmt], name: str, defining: str) -> tuple[bool, bool]:
    """Does the file at `importer` import `name` from the module at `defining` (or star-import it), and does it
    import that module itself (to call ``module.name(...)``)?"""
    stem = PurePosixPath(defining).stem
    modules = [PurePosixPath(defining), *(p for p in PurePosixPath(defining).parents if p.name)]
    by_name = by_module = False
    for node in statements:
        if isinstance(node, ast.ImportFrom):
            names = {a.name for a in node.names}
            by_name |= bool(names & {name, "*"}) and _names_module(importer, node.level, node.module or "", defining)
            by_module |= stem in names and _names_module(importer, node.level, f"{node.module or ''}.{stem}".lstrip("."), defining)
        elif isinstance(node, ast.Import):
            # the module, or a package above it whose attribute chain then reaches it (``import models`` for
            # ``models.dit.DIT(...)``)
            by_module |= any(_names_module(importer, 0, a.name, str(m)) for a in node.names for m in modules)
    return by_name, by_module


def _import_lines(text: str) -> Iterator[str]:
    """The import statements of a file's text, read without parsing: ``from X import ...`` whole, ``import X`` lines."""
    yield from from_import_statements(text)
    yield from (m.group(0) for m in _IMPORT_LINE.finditer(text))


_IMPORT_LINE = re.compile(r"^[ \t]*import[ \t][^\n]*", re.M)


def _import_statements(mod: SourceFile) -> list[ast.stmt]:
    """The import statements of a file, anywhere in it, as the parse's one walk found them."""
    return [*mod.import_froms, *mod.plain_imports]


def _imports_module(importer: str, statements: Sequence[ast.stmt], defining: str) -> bool:
    """Does the file at `importer` import the module at `defining`, or something from it (``import pkg.mod``,
    ``from pkg.mod import X``, ``from pkg import mod``, ``from . import mod``)?"""
    stem = PurePosixPath(defining).stem
    for node in statements:
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if _names_module(importer, node.level, base, defining) or any(
                    _names_module(importer, node.level, f"{base}.{a.name}".lstrip("."), defining) for a in node.names if a.name == stem):
                return True
        elif isinstance(node, ast.Import) and any(_names_module(importer, 0, a.name, defining) for a in node.names):
            return True
    return False


def _names_module(importer: str, level: int, module: str, defining: str) -> bool:
    """Does an import of `module` (relative by `level` dots) in the file at `importer` name the file at `defining`:
    the sibling module a relative import names, or one whose path ends with an absolute import's dotted name?"""
    target = PurePosixPath(defining).with_suffix("")
    if target.name == "__init__":
        target = target.parent  # a package's own module: ``import core`` names core/__init__.py
    parts = [p for p in module.split(".") if p]
    if level:
        base = PurePosixPath(importer).parents[level - 1] if level <= len(PurePosixPath(importer).parents) else None
        return base is not None and base.joinpath(*parts) == target
    return bool(parts) and target.parts[-len(parts):] == tuple(parts)


def _sites(mod: SourceFile, fn: ast.FunctionDef | ast.AsyncFunctionDef, by_name: bool, stem: str) -> Iterable[ast.Call | None]:
    """The calls of the helper `fn` in a file that reaches it by its name (`by_name`: its own file, or one importing
    it) or through its module (``stem.name(...)``); `None` for a mention that is no call: the helper handed on,
    which may be called with anything."""
    for node in ast.walk(mod.tree):
        if isinstance(node, ast.Name):
            named = by_name and node.id == fn.name
        else:
            named = isinstance(node, ast.Attribute) and node.attr == fn.name and isinstance(node.value, ast.Name) and node.value.id == stem
        if not named:
            continue
        call = mod.parents.get(node)
        yield call if isinstance(call, ast.Call) and call.func is node else None


def _flag_definition(call: ast.Call, name: str) -> bool:
    """Is `call` an ``add_argument`` that defines the option `name` (``--use_amp``/``--use-amp``, or ``dest=``)?"""
    if not (isinstance(call.func, ast.Attribute) and call.func.attr == "add_argument"):
        return False
    dest = next((k.value.value for k in call.keywords if k.arg == "dest" and isinstance(k.value, ast.Constant)), None)
    flags = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return dest == name if dest is not None else any(f.startswith("--") and f[2:].replace("-", "_") == name for f in flags)


def _off_by_default(call: ast.Call) -> bool:
    """Does the ``add_argument`` `call` leave its option off: a ``store_true`` flag without a default, or a default that
    is a false literal (a ``store_false`` flag is on by default; an action that is not a literal may be anything)."""
    given = {k.arg: k.value for k in call.keywords}
    action, default = given.get("action"), given.get("default")
    if isinstance(action, ast.Constant) and action.value == "store_true":
        return default is None or _false(default)
    return action is None and default is not None and _false(default)


def _flag_off(mod: SourceFile, name: str) -> Option | None:
    """The option `name` of the file's own argument parser where its default is off (`_off_by_default`). None where
    the file defines no such option, or defines it more than once."""
    defs = [c for c in mod.calls if _flag_definition(c, name)]
    if len(defs) != 1 or not _off_by_default(defs[0]):
        return None
    call = defs[0]
    default = next((k.value for k in call.keywords if k.arg == "default"), None)
    flag = next((a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("--")),
                f"--{name}")
    return Option(name, ast.unparse(default) if default is not None else "False", mod.path, call.lineno, flag=flag)


def _named_by(mod: SourceFile, defined: dict[str, ast.AST]) -> dict[str, set[str | None]]:
    """Who names each of the module-level definitions `defined` in their own file, themselves aside: the other
    definitions, by name, and None for any other code (module-level statements)."""
    named_by: dict[str, set[str | None]] = {name: set() for name in defined}
    for node in ast.walk(mod.tree):
        name = _named(node)
        if name in named_by:
            top = next((c for p, c in mod.steps(node) if p is mod.tree), None)
            if top is not defined[name]:
                named_by[name].add(top.name if isinstance(top, _DEFINITIONS) else None)
    return named_by


def _named(node: ast.AST) -> str | None:
    """The name `node` names, as `_names` reads a mention: a name, an attribute, an import, a string."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.alias):
        return node.name.rpartition(".")[2]
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _names(mod: SourceFile, name: str, skip: ast.AST | None = None) -> bool:
    """Does the file name `name` in its code (a name, an attribute, an import, as itself or as what it binds) or in a
    string that is just the name (``__all__``, ``getattr(policies, "bf16")``), other than at `skip`?"""
    return any(node is not skip and (_named(node) == name or isinstance(node, ast.alias) and node.asname == name)
               for node in ast.walk(mod.tree))


def _parser_option_off(mod: SourceFile, expr: ast.expr) -> Option | None:
    """``args.use_amp``, a flag of the file's own argument parser that defaults off (`_flag_off`), or ``args.strategy ==
    "fsdp"``, an option compared with values its default is not (`_compared_off`)."""
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and self_attribute(expr) is None:
        return _flag_off(mod, expr.attr)
    return _compared_off(mod, expr) if isinstance(expr, ast.Compare) else None


def _string_default(mod: SourceFile, name: str) -> tuple[object, ast.AST] | None:
    """What the string option `name` holds when a run does not name it, with where it is defined: the default of the
    file's one ``add_argument`` for it (None where it gives none; not a flag, not a required option), or of the one
    field of that name of a dataclass of the file (a config class its parser fills: ``strategy: str = "auto"``).
    None where the file defines it otherwise, more than once, or with a default that is no literal."""
    defs = [_argument_default(call) for call in mod.calls if _flag_definition(call, name)]
    defs += [_field_default(stmt) for cls in mod.classes if is_dataclass(cls) for stmt in cls.body
             if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == name]
    return defs[0] if len(defs) == 1 else None


def _string_or_none(value: ast.expr | None) -> bool:
    return isinstance(value, ast.Constant) and isinstance(value.value, (str, type(None)))


def _argument_default(call: ast.Call) -> tuple[object, ast.AST] | None:
    """The literal default of an ``add_argument`` of a string option (None where it gives none); None for a flag
    (an ``action``), a required option or a default that is no literal."""
    given = {k.arg: k.value for k in call.keywords}
    if "action" in given or "required" in given:
        return None
    default = given.get("default")
    if default is not None and not _string_or_none(default):
        return None
    return (default.value if isinstance(default, ast.Constant) else None), call


def _field_default(stmt: ast.AnnAssign) -> tuple[object, ast.AST] | None:
    """The literal default of a dataclass field (``x: str = "auto"``, ``field(default="auto")``)."""
    value = stmt.value
    if isinstance(value, ast.Call):
        value = next((k.value for k in value.keywords if k.arg == "default"), None)
    return (value.value, stmt) if isinstance(value, ast.Constant) and _string_or_none(value) else None


def _compared_off(mod: SourceFile, test: ast.Compare) -> Option | None:
    """``args.strategy == "fsdp"`` (or ``in ("fsdp", "ddp")``): an option of the file (`_string_default`) compared
    with values its default is not, so that a run that does not name it never takes the branch."""
    if len(test.ops) != 1 or not isinstance(test.ops[0], (ast.Eq, ast.In)):
        return None
    left, right = test.left, test.comparators[0]
    if not isinstance(left, ast.Attribute):
        return None
    items = right.elts if isinstance(test.ops[0], ast.In) and isinstance(right, (ast.Tuple, ast.List, ast.Set)) else \
        [right] if isinstance(test.ops[0], ast.Eq) else []
    values = tuple(e.value for e in items if isinstance(e, ast.Constant) and isinstance(e.value, str))
    if not values or len(values) != len(items):
        return None
    found = _string_default(mod, left.attr)
    if found is None or found[0] in values:  # (a definition that is not a literal string makes `found` None)
        return None
    default, where = found
    return Option(left.attr, repr(default), mod.path, where.lineno, flag=f"--{left.attr}", values=values)


def _gives_value(mod: SourceFile, name: str, values: frozenset[str]) -> int | None:
    """The first line where a file gives the string option `name` one of `values` or may (`_find_value`)."""
    for node in ast.walk(mod.tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("--"):
            named = node.value[2:].split("=")[0].replace("-", "_") == name
            if named and not _docstring(mod, node) and not _in_own_value_definition(mod, node, name):
                return node.lineno
            continue
        given = _given(mod, node, name)
        if given is None or isinstance(given, ast.Attribute) and given.attr == name and isinstance(given.ctx, ast.Load) \
                or _passed_on(given, name) and not _false(given):
            continue  # the option passed on (``strategy=args.strategy``)
        if not isinstance(given, ast.Constant) or given.value in values:
            return getattr(given, "lineno", None) or getattr(node, "lineno", 1)
    return None


def _given(mod: SourceFile, node: ast.AST, name: str) -> ast.expr | None:
    """What `node` gives a setting called `name`: a keyword's value, what an attribute store assigns (the target
    itself where that is not known), a dict literal's entry of that key."""
    if isinstance(node, ast.keyword) and node.arg == name:
        return node.value
    if isinstance(node, ast.Attribute) and node.attr == name and isinstance(node.ctx, ast.Store):
        assign = mod.parents.get(node)
        return assign.value if isinstance(assign, (ast.Assign, ast.AnnAssign)) and assign.value is not None else node
    if isinstance(node, ast.Dict):
        return next((v for k, v in zip(node.keys, node.values) if isinstance(k, ast.Constant) and k.value == name), None)
    return None


def _in_own_value_definition(mod: SourceFile, node: ast.Constant, name: str) -> bool:
    parent = mod.parents.get(node)
    return isinstance(parent, ast.Call) and _flag_definition(parent, name)


def _in_own_definition(mod: SourceFile, node: ast.Constant, name: str) -> bool:
    """Is the string `node` part of an ``add_argument`` that defines the option `name` off by default (its flag, its
    help)? Such a definition names the option without turning it on; one whose default is on may."""
    parent = mod.parents.get(node)
    if isinstance(parent, ast.keyword):
        parent = mod.parents.get(parent)
    return isinstance(parent, ast.Call) and _flag_definition(parent, name) and _off_by_default(parent)


def _sets(mod: SourceFile, name: str) -> int | None:
    """The first line where a file turns the option `name` on or may: a parameter of that name with no default or
    one that is not off, a keyword or a store of it whose value is not a false literal nor the option passed on
    (``name=name``, ``name=self.name``), a string naming it (an argparse flag, a dict key; not a docstring)."""
    for node in ast.walk(mod.tree):
        if isinstance(node, (*_FUNCTIONS, ast.Lambda)):
            line = next((a.lineno for a, d, _ in _params(node) if a.arg == name and not _false(d)), None)
        elif isinstance(node, ast.keyword):
            line = node.value.lineno if node.arg == name and not _passed_on(node.value, name) else None
        elif isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Store):
            line = node.lineno if (node.id if isinstance(node, ast.Name) else node.attr) == name and not _harmless_store(node, mod) else None
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            line = node.lineno if name in node.value.replace("-", "_") and not _docstring(mod, node) and not _in_own_definition(mod, node, name) else None
        else:
            line = None
        if line is not None:
            return line
    return None


def _passed_on(value: ast.expr, name: str) -> bool:
    if _false(value):
        return True
    if isinstance(value, ast.Name):
        return value.id == name
    return self_attribute(value) == name


def _harmless_store(target: ast.Name | ast.Attribute, mod: SourceFile) -> bool:
    """A store of the option's name that turns nothing on: off, or the option passed on. Not a field of a class body
    (``use_amp: bool = False`` in a dataclass): a config or argument class, whose fields its parser or config sets."""
    assign = mod.parents.get(target)
    name = target.id if isinstance(target, ast.Name) else target.attr
    return (isinstance(assign, (ast.Assign, ast.AnnAssign)) and assign.value is not None and _passed_on(assign.value, name)
            and not isinstance(mod.parents.get(assign), ast.ClassDef))


def _docstring(mod: SourceFile, node: ast.Constant) -> bool:
    return isinstance(mod.parents.get(node), ast.Expr)


def _said(options: Sequence[Option], rel: Callable[[str], str]) -> str:
    """``runs only with `use_checkpoint=True`, which defaults to False (unet.py:154) and nothing in this project
    sets ...``, for each option once."""
    seen: dict[str, Option] = {}
    for o in options:
        seen.setdefault(o.name, o)
    parts = [(f"`{o.flag} {'/'.join(o.values)}`" if o.values else f"`{o.flag}`" if o.flag else f"`{o.name}=True`" if o.default == "False" else f"`{o.name}` given") + (f" ({o.via})" if o.via else "")
             for o in seen.values()]
    one = len(seen) == 1
    defaults = " and ".join(f"{o.default} ({rel(o.file)}:{o.line})" for o in seen.values())
    return (f"runs only with {' or '.join(parts)}, which default{'s' if one else ''} to {defaults} and nothing in this "
            f"project sets (no call, config, launcher or command-line flag passes {'it' if one else 'them'}): a latent "
            "defect of code the project carries, not of its runs")
