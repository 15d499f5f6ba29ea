"""What kind of code a finding sits in: training, test, benchmark, inference, conversion, visualisation, or library
code, and inside a training file, evaluation code (validation, sampling, generation). A rule whose consequence exists
only while training (gradients, optimizer, loss scaling: `scope: training` in the catalog) is no warning in code that
never trains; one whose consequence exists where a model computes (`scope: compute`: a table's or a model's dtype) is
none in conversion code, which loads and writes weights; every rule is at most a note in tests and benchmarks, which
build odd cases on purpose, and in plotting scripts, whose numbers end in a figure. The kind is read from the path,
the names and what the code does, and the message says which it was and why."""

from __future__ import annotations

import ast
import enum
import re
from dataclasses import dataclass
from pathlib import PurePath

from ampdoctor.lint.python.resolve import last_identifier, tokens, words
from ampdoctor.lint.python.source import SourceFile
from ampdoctor.lint.python.words import TextWords, text_and_words


class CodeKind(enum.Enum):
    TRAINING = "training"
    LIBRARY = "library"  # neither trains nor is any of the others: model and utility modules
    TEST = "test"
    BENCHMARK = "benchmark"
    INFERENCE = "inference"
    CONVERSION = "conversion"
    EVALUATION = "evaluation"  # validation, sampling or generation code inside a training file
    VISUALISATION = "visualisation"  # a script that plots or visualises: what it computes is drawn, not trained or served
    GENERATOR_SOURCE = "generator source"  # a source a code generator writes the module that runs from


@dataclass(frozen=True)
class Kind:
    kind: CodeKind
    why: str  # "the file is under tests/", "inside `log_validation` (line 90)"

    @property
    def trains(self) -> bool:
        return self.kind in (CodeKind.TRAINING, CodeKind.LIBRARY)

    @property
    def computes(self) -> bool:
        """Does the code run a model on data (training, inference, evaluation)? Conversion code loads and writes
        weights: a rule with `scope: compute` (a table's or a model's dtype where it is computed with) is a note there."""
        return self.kind is not CodeKind.CONVERSION

    @property
    def never_warns(self) -> bool:
        """Code where every rule is a note: tests and benchmarks, which build precision cases on purpose, whatever
        they are, sources nothing imports at run time, and plotting scripts, whose numbers are drawn, never trained
        or served from."""
        return self.kind in (CodeKind.TEST, CodeKind.BENCHMARK, CodeKind.GENERATOR_SOURCE, CodeKind.VISUALISATION)


# An import from a transformers modeling module (``from ..llama.modeling_llama import``, ``from
# transformers.models.x.modeling_x import``): what a modular source inherits its classes from.
_MODELING_IMPORT = re.compile(r"^\s*from\s+[\w.]*\bmodeling_\w+\s+import\b", re.M)
_TEST_DIRS = frozenset({"tests", "test", "testing", "unittests", "unit_tests"})
_BENCH_DIRS = frozenset({"bench", "benchmark", "benchmarks", "benchmarking"})
# Consolidating a sharded checkpoint (gathering FSDP or model-parallel shards into one file) loads and writes
# weights: a conversion, whatever wrapper it builds to read the shards.
_CONVERT = frozenset({"convert", "conversion", "converter", "export", "checkpoint2hf", "hf2checkpoint", "quantize",
                      "consolidate", "consolidated", "consolidation"})
_INFER = frozenset({"inference", "infer", "generate", "generation", "sample", "sampling", "demo", "serve", "server",
                    "chat", "eval", "evaluate", "evaluation", "predict", "prediction", "gradio", "webui", "app", "cli_demo"})
# A script that plots or visualises results (`plot_lattice.py`, `visualize_attention.py`): it reads a model or its
# numbers and trains nothing, as inference does.
_PLOT = frozenset({"plot", "plots", "plotting", "visualize", "visualise", "visualization", "visualisation", "vis", "viz"})
# The words of `_PLOT` that say nothing else: a file so named draws figures, and its numbers end there (every rule
# a note). "vis"/"viz" also abbreviate vision (`vis_encoder.py`, a model that runs): inference code, judged as such.
_PLOT_ONLY = _PLOT - {"vis", "viz"}
# A training loop of its own: an optimizer stepped or its gradients zeroed, or a trainer's fit/train. Not a
# `def backward(`, which every autograd Function has: a file that defines one is no training loop. Nor a fit called on
# the object a call has just built (`NearestNeighbors(n_neighbors=k).fit(points)`: a scikit-learn estimator fitted
# to data, which trains no network), unless what built it says trainer (`L.Trainer(max_epochs=1).fit(model)`, `build_trainer(cfg).fit(model)`).
_LOOP = r"\.step\(\)|\bzero_grad\(|(?<!\))\.fit\(|[Tt]rainer\w*\(.*\)\.fit\(|\btrainer\.train\("
TRAINING_LOOP = re.compile(_LOOP)
# What every match of TRAINING_LOOP holds: tested first, since the regex over every file of a large tree costs
# about a second (its alternatives begin with no literal the regex engine can scan for).
_LOOP_WORDS = (".step()", "zero_grad(", ".fit(", "trainer.train(")
# Calls that only training code makes: a loop's, or a backward pass, gradient clipping, a trainer's `.train()`.
TRAINS = re.compile(_LOOP + r"|\bbackward\(|\.train\(\s*(resume_from_checkpoint|\))|\bclip_grad_norm_?\(")


def trains_anywhere(source: str | TextWords) -> bool:
    """Does the module take a training step anywhere: a backward pass, an optimizer step, a trainer's fit or train."""
    # substring tests first: the regex over a long file costs a millisecond, and most library files have none
    text, seen = text_and_words(source)
    return any(w in seen for w in _TRAIN_WORDS) and TRAINS.search(text) is not None


def runs_training_loop(source: str | TextWords) -> bool:
    text, seen = text_and_words(source)
    return any(w in seen for w in _LOOP_WORDS) and TRAINING_LOOP.search(text) is not None


def file_kind(path: str, source: str | TextWords) -> Kind:
    """The kind of a whole file, from its path and whether it trains (backward, optimizer steps, a trainer's fit)."""
    text = text_and_words(source)[0]
    parts = [p.lower() for p in PurePath(path).parts]
    name = parts[-1] if parts else ""
    stem = name[:-3] if name.endswith(".py") else name
    folders = set(parts[:-1])
    found = _exercise_kind(name, stem, parts[:-1])
    if found is not None:
        return found
    if stem.startswith("modular_") and _MODELING_IMPORT.search(text):
        # transformers' modular files: its converter writes modeling_<model>.py from them, and that file is what a
        # model runs (and what a fix edits by hand, often enough); the modular one is never imported.
        return Kind(CodeKind.GENERATOR_SOURCE, f"{name} is a transformers modular source: modeling_{stem[8:]}.py is "
                    "generated from it and is the module that runs; it is not imported")
    words = frozenset(_name_words(stem))
    if trains_anywhere(source):
        return Kind(CodeKind.TRAINING, "")
    if words & _CONVERT:
        return Kind(CodeKind.CONVERSION, f"{name} converts or exports weights and never trains")
    if words & _PLOT_ONLY and "train" not in words:
        return Kind(CodeKind.VISUALISATION, f"{name} plots or visualises results (no backward pass or optimizer step in "
                    "it): what it computes is drawn, no model is trained or served from it")
    if words & _PLOT and "train" not in words:
        return Kind(CodeKind.INFERENCE, f"{name} plots or visualises results (no backward pass or optimizer step in it)")
    if (words & _INFER or folders & _INFER_DIRS) and "train" not in words:
        return Kind(CodeKind.INFERENCE, _inference_why(name, words, parts[:-1]))
    return Kind(CodeKind.LIBRARY, "")


# Folders of code that runs a model and trains nothing: serving and demos, and the evaluation code of a project
# (``src/pkg/eval/``: benchmark harnesses and scoring scripts, which a training config's precision does not reach;
# validation run from a training loop changes no weights either). A file there that trains is training code.
_INFER_DIRS = frozenset({"inference", "serving", "demo", "demos", "eval", "evals", "evaluation"})


def _inference_why(name: str, words: frozenset[str], folders: list[str]) -> str:
    where = next((f for f in reversed(folders) if f in _INFER_DIRS), None)
    if words & _INFER or where is None:
        return f"{name} runs inference (no backward pass or optimizer step in it)"
    what = "evaluation" if where.startswith("eval") else "inference"
    return f"the file is {what} code under {where}/ (no backward pass or optimizer step in it)"


# A module named like these is a training script: one that another training script imports (to reuse its model or
# argument parser) still trains in its own `__main__` block. Helper modules named after training are libraries.
_TRAIN_NAMES = frozenset({"train", "training", "finetune", "finetuning", "pretrain", "pretraining", "sft"})
_HELPER_NAMES = frozenset({"util", "utils", "helper", "helpers", "common", "lib", "tools", "args", "arguments", "config",
                           "configs", "data", "dataset", "datasets", "dataloader", "loader", "collator", "callbacks"})


def _name_words(stem: str) -> list[str]:
    """The words of a file's name: its identifier pieces, and those a hyphen or a dot joins (``eval-llm``,
    ``train.lora``), which no identifier has."""
    return words(_NOT_WORD.sub("_", stem))


_NOT_WORD = re.compile(r"[^0-9A-Za-z]+")


def named_training_script(path: str) -> bool:
    """Whether the file's name says it is a training script (``train.py``, ``finetune_lora.py``), not a helper.
    A training word after "for" names what the module serves (``control_net_for_train.py``: the network a
    training script builds), not the script itself."""
    pieces = _name_words(PurePath(path).name.lower().removesuffix(".py"))
    trains = any(w in _TRAIN_NAMES and (i == 0 or pieces[i - 1] != "for") for i, w in enumerate(pieces))
    return trains and not set(pieces) & _HELPER_NAMES


def _exercise_kind(name: str, stem: str, folders: list[str]) -> Kind | None:
    if stem.startswith("test_") or stem.endswith("_test") or stem in ("conftest", "tests", "test") or _TEST_DIRS & set(folders):
        where = next((f for f in folders if f in _TEST_DIRS), None)
        return Kind(CodeKind.TEST, f"the file is under {where}/" if where else f"{name} is a test module")
    if _BENCH_DIRS & set(folders) or stem.startswith(("bench_", "benchmark")):
        where = next((f for f in folders if f in _BENCH_DIRS), None)
        return Kind(CodeKind.BENCHMARK, f"the file is under {where}/" if where else f"{name} is a benchmark")
    return None


_TRAIN_WORDS = ("backward(", ".step()", ".fit(", ".train(", "clip_grad_norm", "zero_grad(")


# Names of functions (and words of `if` conditions) that validate, sample or generate.
_EVAL_WORDS = frozenset({"validate", "validation", "validations", "val", "eval", "evaluate", "evaluation", "sample", "sampling",
                         "samples", "generate", "generation", "inference", "infer", "predict", "visualize", "visualization",
                         "preview", "log_validation", "test"})
# A no-grad function with one of these words updates training state (an EMA, a sync): it is part of training.
_UPDATES = frozenset({"ema", "update", "step", "clip", "sync", "reduce", "average", "swap", "copy", "init", "initialize"})
_NO_GRAD = frozenset({"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad"})


def site_kind(src: SourceFile, node: ast.AST, file: Kind) -> Kind:
    """The kind of the code at `node`: the file's, or evaluation code inside a training file (a function named
    like validation or sampling, a ``torch.no_grad()`` block, a branch taken for validation)."""
    if not file.never_warns:
        test = _self_test(src, node)
        if test is not None:
            return Kind(CodeKind.TEST, test)
    if file.kind is CodeKind.LIBRARY:
        return _library_evaluation(src, node) or file
    if file.kind is not CodeKind.TRAINING:
        return file
    for parent, child in src.steps(node):
        why = _evaluation(src, parent, child)
        if why:
            return Kind(CodeKind.EVALUATION, why)
        if isinstance(parent, (ast.With, ast.AsyncWith)) and (child in parent.body or child in parent.items) \
                and _discarded_probe(src, parent):
            return Kind(CodeKind.BENCHMARK, f"a probe (line {parent.lineno}) whose outputs are deleted unread and whose "
                                            "gradients are cleared before any optimizer step")
    return file


# Names of library functions that only measure a model (a perplexity or a validation loss over a dataset).
_MEASURES = frozenset({"validate", "validation", "eval", "evaluate", "evaluation", "perplexity", "ppl"})


def _library_evaluation(src: SourceFile, node: ast.AST) -> Kind | None:
    """Evaluation code in a module that trains nothing itself (no backward or optimizer step anywhere in it): a
    function named for validating or measuring (``def eval_ppl(model, data)``). Its losses and log-probabilities are
    numbers reported, never backpropagated. Only the function's name is read here, not `torch.no_grad()`: a library's
    no-grad code also computes what training uses (the old log-probabilities of an RL rollout)."""
    for parent, _ in src.steps(node):
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) and tokens(parent.name) & _MEASURES:
            return Kind(CodeKind.EVALUATION, f"inside `{parent.name}` (line {parent.lineno}), which evaluates a model")
    return None


def _self_test(src: SourceFile, node: ast.AST) -> str | None:
    """A test a module carries for itself: a top-level ``def test_x()`` / ``def _test_x()`` (run by pytest or the
    module's ``__main__``), which builds its own inputs and is no part of what the module does when imported."""
    top = None
    for parent, _ in src.steps(node):
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
            top = parent
    if top is None or not isinstance(src.parents.get(top), ast.Module) or _imports_test_framework(src):
        return None  # a module written for pytest is judged by its path, as a test file is
    if top.name.lstrip("_").startswith("test_") or top.name.lstrip("_") == "test":
        return f"inside `{top.name}` (line {top.lineno}), a test the module carries for itself"
    return None


def _imports_test_framework(src: SourceFile) -> bool:
    for node in src.tree.body:
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] in ("pytest", "unittest") for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("pytest", "unittest"):
            return True
    return False


def _evaluation(src: SourceFile, parent: ast.AST, child: ast.AST) -> str | None:
    if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
        if tokens(parent.name) & _EVAL_WORDS:
            return f"inside `{parent.name}` (line {parent.lineno}), which validates or samples"
        if any(_no_grad(src, d) for d in parent.decorator_list) and not tokens(parent.name) & _UPDATES:
            return f"inside `{parent.name}` (line {parent.lineno}), which runs without gradients"
    elif isinstance(parent, (ast.With, ast.AsyncWith)) and (child in parent.body or child in parent.items):
        if any(_no_grad(src, item.context_expr) for item in parent.items) and not _updates_state(src, parent):
            return f"in a `torch.no_grad()` block (line {parent.lineno}) whose results training does not use"
    elif isinstance(parent, ast.If) and child in parent.body:
        words = {w for n in ast.walk(parent.test) if isinstance(n, (ast.Name, ast.Attribute))
                 for w in tokens(last_identifier(n) or "")}
        if words & _EVAL_WORDS:
            return f"in a branch taken for validation or sampling (line {parent.lineno})"
    return None


def _discarded_probe(src: SourceFile, block: ast.With | ast.AsyncWith) -> bool:
    """A forward and backward pass run only to measure (the memory a batch size needs, its speed): the block binds
    plain names only, each deleted after it (``del out, loss``) and none read before that, changes no other state, and
    the gradients its ``backward()`` leaves are cleared by a ``zero_grad()`` statement after it, before any ``step``
    (nothing in the block reaches the weights)."""
    bound: set[str] = set()
    backward = False
    for node in (n for stmt in block.body for n in ast.walk(stmt)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "backward":
            backward = True
        elif isinstance(node, ast.AugAssign) or _state_call(node):
            return False
        for target in _targets(node):
            if isinstance(target, ast.Name):
                bound.add(target.id)
            elif not isinstance(target, (ast.Tuple, ast.List, ast.expr_context)):
                return False  # an attribute or item set keeps what the block made
    if not backward or not bound:
        return False
    after = src.statements_after(block)
    deleted = {t.id for stmt in after if isinstance(stmt, ast.Delete) for t in stmt.targets if isinstance(t, ast.Name)}
    return bound <= deleted and _cleared_before_step(after) and not _read_after(src, block, bound)


def _cleared_before_step(stmts: list[ast.stmt]) -> bool:
    """A ``x.zero_grad(...)`` statement comes first among the statements, before any call named ``step`` (an
    optimizer or scheduler step, anywhere in a statement before it)."""
    for stmt in stmts:
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "zero_grad":
            return True
        if any(isinstance(n, ast.Call) and last_identifier(n.func) == "step" for n in ast.walk(stmt)):
            return False
    return False


def _updates_state(src: SourceFile, block: ast.With | ast.AsyncWith) -> bool:
    """Does a no-grad block make something training uses next: an optimizer step or a hand-written update
    (``p -= lr * p.grad``), an EMA (``ema.mul_(d).add_(p)``), a copy into weights (``p.data = ...``), an attribute or
    item set (``self.targets = ...``), or a name read after the block before it is bound again (a frozen teacher's targets, a return value).
    A block that only computes values it logs or saves inside itself (validation, sampling, a metric) does not."""
    bound: set[str] = set()
    for node in (n for stmt in block.body for n in ast.walk(stmt)):
        if isinstance(node, ast.AugAssign) or _state_call(node):
            return True
        for target in _targets(node):
            if isinstance(target, (ast.Attribute, ast.Subscript)) and not isinstance(node, ast.For):
                return True
            if isinstance(target, ast.Name):
                bound.add(target.id)
    return bool(bound) and _read_after(src, block, bound)


def _read_after(src: SourceFile, block: ast.With | ast.AsyncWith, bound: set[str]) -> bool:
    """Is one of the names the block binds read after it, before it is bound again: on one of the paths after the
    block (on to the end of the function, or round the loop that holds it to the block again), the first line that
    names it reads it. (A name the block reuses for a value of its own, rebound before training reads it again,
    carries nothing out of the block.)"""
    function = next((a for a in src.ancestors(block) if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef))), src.tree)
    loop = next((a for a in src.ancestors(block) if isinstance(a, (ast.For, ast.AsyncFor, ast.While))
                 and function in src.ancestors(a)), None)
    start, end = block.lineno, block.end_lineno or block.lineno
    named = [n for n in ast.walk(function) if isinstance(n, ast.Name) and n.id in bound and not start <= n.lineno <= end]
    onward = [(n.lineno, n) for n in named if n.lineno > end]
    paths = [onward]
    if loop is not None:  # the next iteration: the rest of the loop, then its start up to the block
        loop_end = loop.end_lineno or loop.lineno
        paths.append([(n.lineno + (0 if n.lineno > end else loop_end), n) for n in named if loop.lineno <= n.lineno <= loop_end])
    return any(_first_is_read(path) for path in paths)


def _first_is_read(path: list[tuple[int, ast.Name]]) -> bool:
    """Given names at their places along one path, is some name's first line on it one that reads it?"""
    first: dict[str, tuple[int, bool]] = {}  # name -> (its first place, read there)
    for place, node in path:
        line, read = first.get(node.id, (place, False))
        if place < line:
            line, read = place, False
        if place == line:
            first[node.id] = (line, read or isinstance(node.ctx, ast.Load))
    return any(read for _, read in first.values())


def _targets(node: ast.AST) -> list[ast.AST]:
    """Every node written by an assignment, loop, ``with ... as`` or walrus: the targets and what they contain."""
    if isinstance(node, ast.Assign):
        roots: list = node.targets
    elif isinstance(node, (ast.With, ast.AsyncWith)):
        roots = [i.optional_vars for i in node.items if i.optional_vars is not None]
    elif isinstance(node, (ast.AnnAssign, ast.For, ast.AsyncFor, ast.NamedExpr)):
        roots = [node.target]
    else:
        return []
    return [t for root in roots for t in ast.walk(root)]


def _state_call(node: ast.AST) -> bool:
    """An in-place tensor method (``add_``, ``copy_``) or a call of `_STATE_CALLS`."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return False
    attr = node.func.attr
    return (attr.endswith("_") and not attr.startswith("_")) or attr in _STATE_CALLS


# Calls that change state in a no-grad block: optimizer and scheduler steps, an EMA's update, loads into a module.
_STATE_CALLS = frozenset({"step", "load_state_dict", "update", "register_buffer"})


def main_block(text: str) -> tuple[int, int] | None:
    """The first and last line of the body of the module-level ``if __name__ == "__main__":`` (its ``else:`` runs on
    import, so is not part of it). Read from the syntax tree: a docstring's usage example or a string continued in
    column 0 would fool a reading of the text."""
    if "__main__" not in text:
        return None
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.If) and _is_main_test(node.test):
            return node.lineno, node.body[-1].end_lineno or node.body[-1].lineno
    return None


def _is_main_test(test: ast.expr) -> bool:
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = (test.left, test.comparators[0])
    return any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides) and \
        any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides)


def _no_grad(src: SourceFile, expr: ast.AST) -> bool:
    target = expr.func if isinstance(expr, ast.Call) else expr
    return src.imports.qualname(target) in _NO_GRAD
