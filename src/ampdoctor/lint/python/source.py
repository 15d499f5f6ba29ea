"""One parsed Python file, walked once: parent links, the nodes the checks look at, and the assignments the
dataflow layer resolves names through."""

from __future__ import annotations

import ast
import functools
import typing
import warnings
from dataclasses import dataclass, field
from typing import Iterator

from ampdoctor.lint.python.resolve import Imports, dotted, method, self_attribute

SCOPES = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)

FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_SCOPE_CLASSES = frozenset(SCOPES)
_DEF_CLASSES = frozenset({ast.FunctionDef, ast.AsyncFunctionDef})
_CLASS_CLASSES = frozenset({ast.ClassDef})
# The fields of a node class that hold nodes, each with whether it holds a list of them, in the order of the class's
# fields (the walk's order fixes the order of the lists it fills). Read from the grammar line each class carries as
# its docstring (``Call(expr func, expr* args, keyword* keywords)``), so the walk never reads a field that holds a
# name, a string or a number (``identifier``, ``string``, ``constant``, ``int``), nor tests each item of a list for
# being a node: a list of nodes holds nodes or None (a ``**d`` key of a dict, a keyword-only parameter without
# default). Left out too: the contexts and operators (`ctx`, `op`, `ops`), leaves the parser shares between all
# their uses (one `Load()`, one `Add()` per interpreter), whose parent link would name whichever use came last.
_SHARED_FIELDS = frozenset({"ctx", "op", "ops"})
_LEAF_TYPES = frozenset({"identifier", "string", "constant", "int"})
_CHILD_FIELDS: dict[type, tuple[tuple[str, bool], ...]] = {}


def _child_fields(kind: type) -> tuple[tuple[str, bool], ...]:
    signature = (kind.__doc__ or "").partition("(")[2].rstrip(")")  # "Pass" has none
    declared = [part.split(" ") for part in signature.split(", ") if part]
    if [field[-1] for field in declared] == list(kind._fields):
        return tuple((name, typ.endswith("*")) for typ, name in declared
                     if typ.rstrip("*?") not in _LEAF_TYPES and name not in _SHARED_FIELDS)
    # No grammar line: the field annotations that Python 3.13 and later carry (`list[ast.expr]`, `ast.expr | None`),
    # so that a Python whose docstrings change still walks its trees.
    types = getattr(kind, "_field_types", None)
    if types is None or set(types) != set(kind._fields):
        raise TypeError(f"ast.{kind.__name__} names its fields neither in a grammar line nor in annotations")
    fields = []
    for name in kind._fields:
        many = typing.get_origin(types[name]) is list
        inner = typing.get_args(types[name]) if many or typing.get_origin(types[name]) is not None else (types[name],)
        if name not in _SHARED_FIELDS and any(isinstance(t, type) and issubclass(t, ast.AST) for t in inner):
            fields.append((name, many))
    return tuple(fields)


# (line, value) per assignment; value None when the right-hand side cannot be paired with the target
# (``cos, sin = rotary(x)``), which makes the name unknown rather than silently skipped.
Binding = tuple[int, "ast.expr | None"]


def _parse(path: str, text: str) -> ast.Module:
    """The file's tree. What the compiler warns of while parsing (``1if x else 0``, an invalid escape in a string) is
    the file's own business, not a finding: printed, it would mix into the report's output on every lint."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        return ast.parse(text, filename=path)


@dataclass
class SourceFile:
    path: str
    text: str
    tree: ast.Module
    imports: Imports = field(default_factory=Imports)
    parents: dict[ast.AST, ast.AST] = field(default_factory=dict)
    calls: list[ast.Call] = field(default_factory=list)
    assigns: list[ast.stmt] = field(default_factory=list)
    classes: list[ast.ClassDef] = field(default_factory=list)
    attributes: list[ast.Attribute] = field(default_factory=list)
    import_froms: list[ast.ImportFrom] = field(default_factory=list)
    plain_imports: list[ast.Import] = field(default_factory=list)  # ``import x.y`` statements, anywhere in the file
    matmuls: list[ast.BinOp] = field(default_factory=list)
    # every `a + b` and `a += b` (the mask sums of AMP133, the running sums of AMP137), so those rules walk no tree
    additions: list[ast.BinOp | ast.AugAssign] = field(default_factory=list)
    strings: list[ast.Constant] = field(default_factory=list)
    functions: list[ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda] = field(default_factory=list)
    asserts: list[ast.Assert] = field(default_factory=list)  # AMP005's dtype asserts, without a walk of its own
    exits: list[ast.stmt] = field(default_factory=list)  # raise, return, break, continue: what code after them is dead
    _names: dict[tuple[ast.AST, str], list[Binding]] | None = None
    _attrs: dict[str, list[Binding]] | None = None
    _by_name: dict[str, list[ast.Call]] | None = None
    _unvouched: set[int] | None = None  # defaults bound for want of what the callers pass (`default_only`)

    @classmethod
    def parse(cls, path: str, text: str) -> "SourceFile":
        tree = _parse(path, text)
        src = cls(path, text, tree)
        src._walk()
        return src

    @staticmethod
    def syntax_check(path: str, text: str) -> None:
        """Parse without indexing: for files no check applies to, which still get their syntax errors reported."""
        _parse(path, text)

    def _walk(self) -> None:
        parents = self.parents

        def import_from(node: ast.ImportFrom) -> None:
            self.imports.add(node)
            self.import_froms.append(node)

        def plain_import(node: ast.Import) -> None:
            self.imports.add(node)
            self.plain_imports.append(node)

        found = {ast.Call: self.calls.append, ast.Attribute: self.attributes.append, ast.Assign: self.assigns.append,
                 ast.AnnAssign: self.assigns.append, ast.ClassDef: self.classes.append, ast.Assert: self.asserts.append,
                 ast.Import: plain_import, ast.ImportFrom: import_from, **{f: self.functions.append for f in FUNCTIONS},
                 **{e: self.exits.append for e in _EXITS}}
        Constant, BinOp, AugAssign, MatMult, Add = ast.Constant, ast.BinOp, ast.AugAssign, ast.MatMult, ast.Add
        Name = ast.Name
        children = _CHILD_FIELDS
        todo: list[ast.AST] = [self.tree]
        pop, push = todo.pop, todo.append
        while todo:
            node = pop()
            kind = node.__class__
            add = found.get(kind)
            if add is not None:
                add(node)
            elif kind is Constant:
                if node.value.__class__ is str:
                    self.strings.append(node)
                continue  # no child
            elif kind is BinOp or kind is AugAssign:
                op = node.op.__class__
                if op is Add:
                    self.additions.append(node)
                elif op is MatMult and kind is BinOp:
                    self.matmuls.append(node)
            fields = children.get(kind)
            if fields is None:
                fields = children[kind] = _child_fields(kind)
            # A Name (most nodes of a tree) gets its parent link but is not pushed: it has no child, no list takes it.
            for name, many in fields:
                value = getattr(node, name)
                if many:
                    for item in value:
                        if item is not None:
                            parents[item] = node
                            if item.__class__ is not Name:
                                push(item)
                elif value is not None:
                    parents[value] = node
                    if value.__class__ is not Name:
                        push(value)

    # --- structure ------------------------------------------------------------------------------

    def ancestors(self, node: ast.AST) -> Iterator[ast.AST]:
        parent = self.parents.get(node)
        while parent is not None:
            yield parent
            parent = self.parents.get(parent)

    def _nearest(self, node: ast.AST, classes: frozenset[type]) -> ast.AST | None:
        """The nearest ancestor of `node` of one of `classes`. Asked of most nodes a check reads, by many checks
        (`scope`, `enclosing_function`, `enclosing_class`): a plain loop over `parents` on the exact class, with no
        generator and no isinstance."""
        parents = self.parents
        parent = parents.get(node)
        while parent is not None:
            if parent.__class__ in classes:
                return parent
            parent = parents.get(parent)
        return None

    def scope(self, node: ast.AST) -> ast.AST:
        return self._nearest(node, _SCOPE_CLASSES) or self.tree

    def enclosing_function(self, node: ast.AST) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        return self._nearest(node, _DEF_CLASSES)  # type: ignore[return-value]

    def is_parameter(self, node: ast.AST) -> bool:
        """`node` is a name that a named parameter of its enclosing function binds (not ``*args``/``**kwargs``)."""
        fn = self.enclosing_function(node)
        return isinstance(node, ast.Name) and fn is not None \
            and any(a.arg == node.id for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs))

    def in_unused_private_method(self, node: ast.AST) -> bool:
        """`node` sits in a private method (``_norm``, not a dunder) that nothing in its file names: no
        ``self._norm(...)``, no reference by name or string. Code a class keeps but never runs (its forward calls a
        fused kernel instead); a subclass elsewhere calling a private method is rare enough not to count."""
        fn = self.enclosing_function(node)
        if fn is None or not isinstance(self.parents.get(fn), ast.ClassDef):
            return False
        name = fn.name
        if not name.startswith("_") or name.endswith("__"):
            return False
        if any(a.attr == name for a in self.attributes) or any(c.value == name for c in self.strings):
            return False
        return not any(isinstance(n, ast.Name) and n.id == name for n in self.parents)

    def enclosing_class(self, node: ast.AST) -> ast.ClassDef | None:
        return self._nearest(node, _CLASS_CLASSES)  # type: ignore[return-value]

    def own_returns(self, fn: ast.AST) -> list[ast.Return]:
        """The ``return`` statements of `fn`'s own body, not of functions nested in it, in the order of `ast.walk`."""
        return [r for r in ast.walk(fn) if isinstance(r, ast.Return) and self.enclosing_function(r) is fn]

    def block_of(self, node: ast.AST) -> list[ast.stmt] | None:
        """The statement list (a body, an ``else``, a ``finally``) that holds `node`: the statements before it in the
        list run first, those after it next. None for a node that is no statement of a block."""
        parent = self.parents.get(node)
        for part in ("body", "orelse", "finalbody"):
            block = getattr(parent, part, None)
            if isinstance(block, list) and node in block:
                return block
        return None

    def exclusive(self, a: ast.AST, b: ast.AST) -> bool:
        """Can `a` and `b` never run in one pass: the two sides of one ``if``, or opposite sides of two ``if``
        statements of one function that test the same unchanged thing (``if x:`` and ``if not x:``; ``if x:`` and
        the else of a later ``if x:``, however deep each sits)?"""
        path_a = {id(p): (p, c) for p, c in self.steps(a)}
        for parent, child_b in self.steps(b):
            if id(parent) in path_a:
                child_a = path_a[id(parent)][1]
                if isinstance(parent, ast.If) and child_a is not parent.test and child_b is not parent.test:
                    return (child_a in parent.body) != (child_b in parent.body)
                break
        scope = self.enclosing_function(a)
        if scope is not self.enclosing_function(b):
            return False
        sides_b = list(self._if_sides(b))
        for if_a, side_a in self._if_sides(a):
            for if_b, side_b in sides_b:
                if if_a is not if_b and _opposite(if_a, side_a, if_b, side_b) \
                        and self._unchanged(if_a.test, min(if_a.lineno, if_b.lineno), scope or self.tree):
                    return True
        return False

    def _if_sides(self, node: ast.AST) -> Iterator[tuple[ast.If, bool]]:
        """The ``if`` statements of its function that `node` sits in, each with True in its body, False in its else."""
        for parent, child in self.steps(node):
            if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                return
            if isinstance(parent, ast.If) and child is not parent.test:
                yield parent, child in parent.body

    def _unchanged(self, test: ast.expr, line: int, scope: ast.AST) -> bool:
        """Does `test` give the same answer at both of its ``if`` statements: no call in it, and every name in it
        bound (if at all in `scope`) only before the first of them?"""
        if any(isinstance(n, ast.Call) for n in ast.walk(test)):
            return False
        return all(all(at < line for at, _ in self.bindings(n, scope))
                   for n in ast.walk(test) if isinstance(n, (ast.Name, ast.Attribute)))

    def steps(self, node: ast.AST) -> Iterator[tuple[ast.AST, ast.AST]]:
        """(ancestor, the child of it on the way to `node`), nearest first: what a walk up that asks which branch or
        block of an ancestor holds `node` reads."""
        child = node
        for parent in self.ancestors(node):
            yield parent, child
            child = parent

    # --- assignments ----------------------------------------------------------------------------

    def _after_an_exit(self) -> set[int]:
        """The assignments that never run: those after a ``raise``, ``return``, ``break`` or ``continue`` in the same
        block, or inside a statement that follows one (``raise NotImplementedError`` above the dtype a half option
        would set). A value they assign is no value the name can hold."""
        return {id(n) for stop in self.exits for later in self.statements_after(stop)  # exits: from the file's one walk
                for n in ast.walk(later) if isinstance(n, (ast.Assign, ast.AnnAssign))}

    def statements_after(self, stmt: ast.AST) -> list[ast.stmt]:
        """The statements after `stmt` in the statement list (a body, an else, a finally) that holds it."""
        parent = self.parents.get(stmt)
        for part in ("body", "orelse", "finalbody"):
            block = getattr(parent, part, None)
            if isinstance(block, list):
                at = next((i for i, s in enumerate(block) if s is stmt), None)
                if at is not None:
                    return block[at + 1:]
        return []

    def _index_assignments(self) -> None:
        names: dict[tuple[ast.AST, str], list[Binding]] = {}
        attrs: dict[str, list[Binding]] = {}

        dead = self._after_an_exit()
        for node in self.assigns:
            scope = self.scope(node)
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if isinstance(node, ast.AnnAssign) and node.value is None or id(node) in dead:
                continue
            for target in targets:
                _bind(names, attrs, target, node.value, node.lineno, scope)
        # Parameters bind in their function: to their default (what a call that omits them gets), else to an
        # unknown value, so that a parameter never resolves to a same-named global it shadows.
        # A parameter every caller in this file gives a literal (``Attention(dim, torch_dtype=torch.bfloat16)``) is
        # bound to what they give: `self.torch_dtype` then resolves to bf16 in the callee.
        sites = self._call_sites()
        unvouched: set[int] = set()
        for fn in self.functions:  # each function's bindings are its own: the order of the functions does not matter
            calls = sites.get(fn, [])
            for index, (arg, default) in enumerate(parameters(fn.args)):
                passed = _passed(calls, arg.arg, index - _bound_first(fn), default)
                if passed is None and default is not None:
                    unvouched.add(id(default))
                for value in passed or [default]:
                    names.setdefault((fn, arg.arg), []).append((fn.lineno, value))
        for bindings in (*names.values(), *attrs.values()):
            bindings.sort(key=lambda b: b[0])
        self._names, self._attrs, self._unvouched = names, attrs, unvouched

    def _call_sites(self) -> dict[ast.AST, list[ast.Call]]:
        """Calls of this file's functions and classes by plain name (``f(...)``, ``Cls(...)`` -> its __init__)."""
        targets: dict[str, ast.AST] = {}
        for node in _module_level(self.tree.body):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                targets[node.name] = node
            elif isinstance(node, ast.ClassDef):
                init = method(node, "__init__")
                if init is not None:
                    targets[node.name] = init
        return {target: calls for name, target in targets.items() if (calls := self.calls_of(name))}

    @functools.cached_property
    def top_level(self) -> dict[str, list[ast.stmt]]:
        """By name, the statements of the module's own body that bind it: its classes and functions, and assignments
        to the plain name (``BLOCKS = {...}``), in the order written."""
        defined: dict[str, list[ast.stmt]] = {}
        for node in self.tree.body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                defined.setdefault(node.name, []).append(node)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    if isinstance(target, ast.Name):
                        defined.setdefault(target.id, []).append(node)
        return defined

    @functools.cached_property
    def rebinds_unseen(self) -> bool:
        """May the file bind names its text does not show: a star import, a call of ``exec`` (nanoGPT's configurator
        rebinds its globals from the command line), a store into ``globals()`` or its ``update``."""
        if any(a.name == "*" for node in self.import_froms for a in node.names):
            return True
        for call in self.calls:
            if isinstance(call.func, ast.Name) and call.func.id == "exec":
                return True
            if isinstance(call.func, ast.Name) and call.func.id == "globals":
                parent = self.parents.get(call)
                if isinstance(parent, ast.Subscript) and isinstance(parent.ctx, ast.Store) or \
                        isinstance(parent, ast.Attribute) and parent.attr in ("update", "setdefault", "__setitem__"):
                    return True
        return False

    def default_only(self, value: ast.AST) -> bool:
        """Is `value` a parameter's default bound for want of better: the file never calls the function, or one of
        its calls passes something other than a literal there. What the function sees is then unknown."""
        if self._unvouched is None:
            self._index_assignments()
        return id(value) in (self._unvouched or ())

    def calls_of(self, name: str) -> list[ast.Call]:
        """The file's calls of a plain name, ``name(...)``, in the order they are written."""
        if self._by_name is None:
            by_name: dict[str, list[ast.Call]] = {}
            for call in self.calls:
                if isinstance(call.func, ast.Name):
                    by_name.setdefault(call.func.id, []).append(call)
            self._by_name = by_name
        return self._by_name.get(name, [])

    def built_in_class(self, cls: ast.ClassDef) -> dict[str, list[ast.Call]]:
        """By attribute, the calls ``self.<attr> = Call(...)`` assigns anywhere in `cls` (in its nested functions and
        classes too), one per assignment, in no set order: the submodules and parameters the class builds."""
        return self._built_by_class.get(cls, {})

    @functools.cached_property
    def _built_by_class(self) -> dict[ast.ClassDef, dict[str, list[ast.Call]]]:
        # asked for every ``self.x(...)`` call a value is traced through: one pass over the assignments, not a walk
        # of the class per call
        built: dict[ast.ClassDef, dict[str, list[ast.Call]]] = {}
        for node in self.assigns:
            if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Call):
                continue
            attrs = {a for a in map(self_attribute, node.targets) if a is not None}
            for cls in self.ancestors(node) if attrs else ():
                if isinstance(cls, ast.ClassDef):
                    for attr in attrs:
                        built.setdefault(cls, {}).setdefault(attr, []).append(node.value)
        return built

    def calls_in(self, fn: ast.FunctionDef | ast.AsyncFunctionDef | None) -> list[ast.Call]:
        """The calls made in `fn`'s own body, not in functions nested in it (None: the module's top-level code), in
        the order of `calls`."""
        return self._calls_by_function.get(fn, [])

    @functools.cached_property
    def _calls_by_function(self) -> dict[ast.AST | None, list[ast.Call]]:
        grouped: dict[ast.AST | None, list[ast.Call]] = {}
        for call in self.calls:
            grouped.setdefault(self.enclosing_function(call), []).append(call)
        return grouped

    def bindings(self, expr: ast.expr, scope: ast.AST) -> list[Binding]:
        """Every assignment to the name or attribute chain `expr`: Names in `scope` or, if never assigned
        there, in the enclosing scopes; attribute chains (``self.dtype``) anywhere in the file."""
        if self._names is None:
            self._index_assignments()
        assert self._names is not None and self._attrs is not None
        if isinstance(expr, ast.Name):
            found = self._names.get((scope, expr.id))
            if found:
                return found
            for outer in self.ancestors(scope):
                if isinstance(outer, SCOPES) and not isinstance(outer, ast.ClassDef):
                    found = self._names.get((outer, expr.id))
                    if found:
                        return found
            return self._names.get((self.tree, expr.id), [])
        key = dotted(expr)
        return self._attrs.get(key, []) if key else []

    def reaching(self, expr: ast.Name, scope: ast.AST) -> list[Binding]:
        """The assignments above the use `expr` that may be the value it reads: the last one above it and, while
        that one may not have run when the use runs (it sits in a branch, loop or ``try`` the use is not on the same
        side of), the ones before it, up to one that always has, less those a later one always overwrites. Last
        first. ``x = cpu()`` in an ``if`` and ``x = gpu()`` in its ``else``: both."""
        out: list[Binding] = []
        for line, value in reversed(self.bindings(expr, scope)):
            if line >= expr.lineno:
                continue
            # one that a later one always overwrites is read by nothing (``grid = np.linspace(...)`` then
            # ``grid = torch.from_numpy(grid)`` in one ``else``)
            if value is not None and any(v is not None and self._runs_before(v, value) for _, v in out):
                continue
            out.append((line, value))
            if value is not None and self._runs_before(value, expr):
                break
        return out

    def _runs_before(self, first: ast.AST, then: ast.AST) -> bool:
        """Has `first` always run where `then` runs: every branch, loop body or ``try`` part that holds `first`
        holds `then` in the same part? (Its place above `then` is the caller's to know.)"""
        path = {id(p): c for p, c in self.steps(then)}
        for parent, child in self.steps(first):
            if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.Module)):
                return True
            if not isinstance(parent, _BRANCHING) or child is getattr(parent, "test", None) \
                    or child is getattr(parent, "iter", None):
                continue
            if id(parent) not in path:
                return False
            other = path[id(parent)]
            if _part_of(parent, child) != _part_of(parent, other):
                return False
        return True


_EXITS = (ast.Raise, ast.Return, ast.Break, ast.Continue)


# Statements and expressions whose parts may not run, or may run without the others (``try``/``except*`` from
# Python 3.11).
_TRIES = (ast.Try, getattr(ast, "TryStar", ast.Try))
_BRANCHING = (ast.If, ast.For, ast.AsyncFor, ast.While, *_TRIES, ast.ExceptHandler, ast.Match, ast.match_case, ast.IfExp,
              ast.BoolOp, ast.comprehension)


def _part_of(parent: ast.AST, child: ast.AST) -> str | int:
    """The field of `parent` that holds `child` (``body``, ``orelse``...), or its place in a list field that runs
    one element at a time (a handler, a match case, a BoolOp's operand)."""
    for name, value in ast.iter_fields(parent):
        if value is child:
            return name
        if isinstance(value, list) and child in value:
            return value.index(child) if isinstance(parent, (*_TRIES, ast.Match, ast.BoolOp)) \
                and name in ("handlers", "cases", "values") else name
    return ""


def _module_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The module's statements, those of its top-level ``try``/``if`` blocks included: where a fallback is defined
    when an import fails (``try: from lib import f`` / ``except ImportError: def f(...)``)."""
    for node in body:
        yield node
        if isinstance(node, (ast.Try, ast.If)):
            blocks = [node.body, node.orelse] + ([node.finalbody, *(h.body for h in node.handlers)] if isinstance(node, ast.Try) else [])
            for block in blocks:
                yield from _module_level(block)


def _opposite(a: ast.If, side_a: bool, b: ast.If, side_b: bool) -> bool:
    """Are these sides of two ``if`` statements never taken together: the same test on opposite sides, or a test and
    its negation (``if x:`` / ``if not x:``) on the same side?"""
    if ast.dump(a.test) == ast.dump(b.test):
        return side_a != side_b
    for x, y in ((a.test, b.test), (b.test, a.test)):
        if isinstance(y, ast.UnaryOp) and isinstance(y.op, ast.Not) and ast.dump(y.operand) == ast.dump(x):
            return side_a == side_b
    return False


def _bound_first(fn: ast.AST) -> int:
    """1 for a method (its first parameter is bound by the call, not passed), else 0."""
    return 1 if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name == "__init__" else 0


def _bind(names: dict[tuple[ast.AST, str], list[Binding]], attrs: dict[str, list[Binding]], target: ast.AST,
          value: ast.expr | None, line: int, scope: ast.AST) -> None:
    """Record what an assignment's target binds (`SourceFile._index_assignments`), through tuple targets. A module
    function, not a closure: a closure that calls itself is a reference cycle, which would keep the tables, and
    through them the whole tree, alive until the cycle collector runs, and the lint pauses it (`pool`)."""
    if isinstance(target, (ast.Tuple, ast.List)):
        paired = isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts)
        for i, elt in enumerate(target.elts):
            _bind(names, attrs, elt, value.elts[i] if paired else None, line, scope)
    elif isinstance(target, ast.Name):
        names.setdefault((scope, target.id), []).append((line, value))
    elif isinstance(target, ast.Attribute):
        key = dotted(target)
        if key is not None:
            attrs.setdefault(key, []).append((line, value))
    elif isinstance(target, ast.Starred):
        _bind(names, attrs, target.value, None, line, scope)


def _passed(calls: list[ast.Call], name: str, position: int, default: ast.expr | None) -> list[ast.expr] | None:
    """What every call passes for one parameter, when each passes a literal (a string, a number, ``torch.X``) or
    leaves the default; None when there is no call, or one passes anything else (a variable of the caller's scope
    means nothing in the callee's)."""
    if not calls or position < 0:
        return None
    out: list[ast.expr] = []
    for call in calls:
        if any(isinstance(a, ast.Starred) for a in call.args) or any(kw.arg is None for kw in call.keywords):
            return None
        value = next((kw.value for kw in call.keywords if kw.arg == name), None)
        if value is None and position < len(call.args):
            value = call.args[position]
        if value is None:
            if default is None:
                return None
            value = default
        if not _literal(value):
            return None
        out.append(value)
    return out


def _literal(value: ast.expr) -> bool:
    if isinstance(value, ast.Constant):
        return True
    return isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and value.value.id == "torch"


def parameters(args: ast.arguments) -> list[tuple[ast.arg, ast.expr | None]]:
    """Each parameter with its default expression (None when it has none)."""
    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    out = list(zip(positional, defaults)) + list(zip(args.kwonlyargs, args.kw_defaults))
    out += [(a, None) for a in (args.vararg, args.kwarg) if a is not None]
    return out
