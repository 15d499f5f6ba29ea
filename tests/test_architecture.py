"""The shape of the code: no import cycles, a static path without torch, small functions, one home per rule."""

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PACKAGE = SRC / "ampdoctor"


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def _top_level_imports(tree: ast.Module):
    """Import statements executed when the module is imported: not in functions, classes or `if TYPE_CHECKING:`."""
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            if not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
                todo.extend(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            todo.extend(node.body + node.orelse + node.finalbody + [s for h in node.handlers for s in h.body])


def imported_modules(name: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The ampdoctor modules one import statement of module `name` imports (`from pkg import sub` imports the
    submodule; relative imports resolved)."""
    if isinstance(node, ast.Import):
        found = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            package = name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]
            for _ in range(node.level - 1):
                package = package.rpartition(".")[0]
            base = f"{package}.{base}" if base else package
        found = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
    return [m for m in found if m in MODULES and m != name]


def imports_of(name: str) -> set[str]:
    """The ampdoctor modules `name` imports when it is imported."""
    return {m for node in _top_level_imports(ast.parse(MODULES[name].read_text())) for m in imported_modules(name, node)}


GRAPH = {name: imports_of(name) for name in MODULES}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_cycles():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    assert cycles(GRAPH) == []


def test_renderers_and_policy_do_not_import_the_package_root_or_frameworks():
    assert "ampdoctor" not in set().union(*(GRAPH[m] for m in MODULES if m.startswith("ampdoctor.report")))
    assert not any(m.startswith("ampdoctor.frameworks") for m in GRAPH["ampdoctor.policy"])


STATIC = ["ampdoctor", "ampdoctor.cli", "ampdoctor.lint.engine", "ampdoctor.lint.configs", "ampdoctor.lint.python.runner",
          "ampdoctor.explain", "ampdoctor.core.catalog", "ampdoctor.core.registry", "ampdoctor.policy", "ampdoctor.report"]


def _closure(start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo.extend(GRAPH[m])
    return seen


def imports_torch(name: str) -> bool:
    for node in _top_level_imports(ast.parse(MODULES[name].read_text())):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        if any(n == "torch" or n.startswith("torch.") for n in names):
            return True
    return False


@pytest.mark.parametrize("start", STATIC)
def test_the_static_path_imports_no_torch_at_import_time(start):
    # Rule modules are loaded by the registry, so they are part of every static path.
    rule_modules = [m for m in MODULES if re.search(r"\.rules\.amp\d{3}_", m)]
    reached = _closure(start).union(*(_closure(m) for m in rule_modules))
    assert sorted(m for m in reached if imports_torch(m)) == []
    assert imports_torch("ampdoctor.audit.recorder")  # the check can fail


# A stand-in interpreter where `import torch` fails, as on a machine (or a pre-commit environment) without it.
NO_TORCH = "import sys; sys.modules['torch'] = None; from ampdoctor.cli import main; sys.exit(main(sys.argv[1:]))"


def run_without_torch(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", NO_TORCH, *args], capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(SRC)})


def test_lint_explain_rules_and_export_work_without_torch():
    lint = run_without_torch("lint", "--no-config", "--format", "json", "examples/configs/incident4_h2o", "examples/code/incident4_gradscaler.py")
    assert lint.returncode == 1, lint.stderr
    assert '"grad-scaler-with-bf16"' in lint.stdout and "Traceback" not in lint.stderr
    explain = run_without_torch("explain", "RuntimeError: Expected BFloat16, got Float")
    assert explain.returncode == 0 and "grad-dtype-mismatch" in explain.stdout
    rules = run_without_torch("rules", "AMP004")
    assert rules.returncode == 0 and "rules/amp004_grad_scaler_with_bf16.py" in rules.stdout
    export = run_without_torch("export", "--policy", "bf16-mixed", "--to", "fsdp")
    assert export.returncode == 0 and "MixedPrecisionPolicy(" in export.stdout


@pytest.mark.parametrize("command", [["run", "train.py"], ["audit", "--hf-config", "c.json"], ["env"]])
def test_runtime_commands_say_in_one_line_how_to_get_torch(command):
    proc = run_without_torch(*command)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"ampdoctor: error: ampdoctor {command[0]} needs PyTorch, which is not installed: "
                                                "pip install torch  (or: pip install 'ampdoctor[torch]')"]


def test_no_function_is_too_complex_to_read():
    from radon.complexity import cc_visit

    too_complex = []
    for name, path in MODULES.items():
        for block in cc_visit(path.read_text()):
            if block.complexity > 20:
                too_complex.append(f"{name}.{block.name}: {block.complexity}")
    assert too_complex == []


def test_findings_are_built_only_where_rules_are_known():
    """Detectors yield hits that the registry turns into findings of the rule they are registered under; only
    the registry glue, explain (a detector of every rule with signatures) and the code-check runner (which
    attaches the registered rule to each (node, message)) build findings by rule name."""
    allowed = {"ampdoctor.core.catalog", "ampdoctor.explain", "ampdoctor.lint.python.runner", "ampdoctor.fix"}
    calls = {m for m, p in MODULES.items() for node in ast.walk(ast.parse(p.read_text()))
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "finding"}
    builders = sorted(calls - allowed)
    assert builders == []


def test_no_pickle_anywhere_in_the_package():
    # Reports cross process and machine boundaries (torchrun ranks, shared --output dirs): no format that runs code
    # when loaded. Neither pickle nor its relatives (marshal, shelve, dill, cloudpickle, torch.load of reports).
    banned = re.compile(r"\b(pickle|cPickle|marshal|shelve|dill|cloudpickle|joblib)\b|torch\.load\(")
    hits = [f"{path.relative_to(ROOT)}:{n}" for path in sorted(PACKAGE.rglob("*.py"))
            for n, line in enumerate(path.read_text().splitlines(), 1)
            if banned.search(line.split("#", 1)[0])]
    assert hits == []


# Floors, lowest first: a module may import from its own floor or any floor below, never from one above. Type-only
# imports (`if TYPE_CHECKING:`) and imports inside functions count too: a lazy import up a floor is still a
# dependency up a floor. Within a floor, `test_no_import_cycles` keeps the order a DAG.
FLOORS = (
    ("base", ("ampdoctor._version", "ampdoctor._quote", "ampdoctor._requires", "ampdoctor.dtypes")),
    ("core", ("ampdoctor.core", "ampdoctor.facts", "ampdoctor.hardware", "ampdoctor.policy")),
    ("report", ("ampdoctor.report", "ampdoctor.explain")),
    ("engines", ("ampdoctor.frameworks", "ampdoctor.lint", "ampdoctor.audit", "ampdoctor.numerics", "ampdoctor.nn",
                 "ampdoctor.fix", "ampdoctor.train", "ampdoctor.env")),
    ("rules", ("ampdoctor.rules",)),
    ("entry", ("ampdoctor.integrations", "ampdoctor.cli", "ampdoctor.__main__", "ampdoctor")),
)
# Imports by name at run time, each with why it may go where it goes. The registry's loader is the one way from
# the core up to the rules; the others load what the user named, or stay at their own floor or below.
DYNAMIC_IMPORTS = {
    "ampdoctor.core.registry": "the loader: imports every rule module of RULES_PACKAGE by name",
    "ampdoctor.cli.common": "--model module:factory names the user's own code",
    "ampdoctor": "the package root's lazy attributes (PEP 562): entry floor, may import anything",
}


def floor_of(module: str) -> int:
    """The floor of the longest prefix that names `module`."""
    best = max(((len(p), i) for i, (_, prefixes) in enumerate(FLOORS) for p in prefixes
                if module == p or module.startswith(p + ".")), default=None)
    assert best is not None, f"{module} is on no floor: add it to FLOORS"
    return best[1]


def every_import_of(name: str) -> list[tuple[str, int]]:
    """(ampdoctor module, line) for every import statement anywhere in the module, type-only and lazy ones included."""
    return [(m, node.lineno) for node in ast.walk(ast.parse(MODULES[name].read_text())) if isinstance(node, (ast.Import, ast.ImportFrom))
            for m in imported_modules(name, node)]


def upward_imports(floors_of=floor_of) -> list[str]:
    return [f"{MODULES[m].relative_to(ROOT)}:{line}: {m} imports {target}"
            for m in sorted(MODULES) for target, line in every_import_of(m) if floors_of(target) > floors_of(m)]


def test_no_import_runs_up_a_floor():
    assert upward_imports() == []


def test_the_floor_check_can_fail():
    # Put the renderers under the core and the report's imports of the core run up a floor.
    swapped = {"ampdoctor.report": 0}
    found = upward_imports(lambda m: next((f for p, f in swapped.items() if m == p or m.startswith(p + ".")), floor_of(m)))
    assert any(line.startswith("src/ampdoctor/report/") for line in found)


def test_nothing_imports_a_rule_module():
    # Rule modules are the roof: the registry's loader is the only way in, so a rule can change without
    # anything else noticing.
    importers = sorted(f"{m} imports {t}" for m in MODULES for t, _ in every_import_of(m) if re.search(r"\.rules\.amp\d{3}_", t))
    assert importers == []


def _imports_by_name(tree: ast.AST):
    """import_module(...) / __import__(...) calls that may load ampdoctor code (a literal name outside it may not)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and ((isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                                                         or (isinstance(node.func, ast.Name) and node.func.id == "__import__")):
            arg = node.args[0]
            if not (isinstance(arg, ast.Constant) and not str(arg.value).startswith("ampdoctor")):
                yield node


def test_every_import_by_name_is_justified():
    calls = {m for m, p in MODULES.items() if any(_imports_by_name(ast.parse(p.read_text())))}
    assert sorted(calls - set(DYNAMIC_IMPORTS)) == []
    assert "ampdoctor.core.registry" in calls  # the check sees the loader


def test_the_core_imports_nothing_above_itself_even_lazily():
    core = [m for m in MODULES if floor_of(m) <= 1]
    assert "ampdoctor.core.registry" in core
    assert sorted({t for m in core for t, _ in every_import_of(m) if floor_of(t) > 1}) == []


# What a runtime rule may know of a recording: the typed views of `audit.evidence` through `provenance.Trace` and
# `analysis.RuntimeContext`, never the recorder or its record layout, so that a rule changes in its own file only.
PRIVATE_TO_THE_RECORDER = ("ampdoctor.audit.recorder", "ampdoctor.audit.fields", "ampdoctor.audit.dispatch",
                           "ampdoctor.audit.modules", "ampdoctor.audit.optimizer", "ampdoctor.audit.sampler")


def recorder_leaks(source: str) -> list[str]:
    """Imports of the recorder's modules or of another rule module, and reads of `.rec` or `.records`, in a rule's source."""
    out = []
    for node in ast.walk(ast.parse(source)):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        out += [f"{node.lineno}: imports {n}" for n in names if n in PRIVATE_TO_THE_RECORDER or re.search(r"\.rules\.amp\d{3}_", n)]
        if isinstance(node, ast.Attribute) and node.attr in ("rec", "records"):
            out.append(f"{node.lineno}: reads .{node.attr}")
    return out


def test_no_rule_module_knows_the_recorder():
    leaks = {name: found for name, path in MODULES.items() if re.search(r"\.rules\.amp\d{3}_", name)
             if (found := recorder_leaks(path.read_text()))}
    assert leaks == {}


def test_the_recorder_leak_check_can_fail():
    assert recorder_leaks("from ampdoctor.audit.fields import IN_DT\nx = ctx.trace.rec.opt_events\n") == [
        "1: imports ampdoctor.audit.fields", "2: reads .rec"]
    assert recorder_leaks("import ampdoctor.rules.amp119_pure_bf16_optimizer\nfor r in t.records: pass\n") == [
        "1: imports ampdoctor.rules.amp119_pure_bf16_optimizer", "2: reads .records"]
