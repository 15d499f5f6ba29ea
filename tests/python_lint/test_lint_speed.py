"""What the lint does to be fast must not change what it finds: trigger words remembered per file answer as
``word in text`` does, the one walk indexes what the checks read, and the two phases of a project lint (summaries
first, then one parse per file for both its judgements) give what judging each file twice gives."""

import ast
import random
import textwrap
from pathlib import Path

import pytest
from test_project_model import ROPE, TRAIN, amp101, lint, write

from ampdoctor.core.registry import detectors
from ampdoctor.lint.python import lint_python_files
from ampdoctor.lint.python.source import SourceFile, _child_fields
from ampdoctor.lint.python.triggers import checks_for, vocabulary
from ampdoctor.lint.python.words import TextWords, Vocabulary, gates_for


def test_remembered_words_answer_as_a_search_of_the_text_does():
    # identifier-only words (looked for in the text's runs), words with other characters (their pieces first, then
    # the text), words with no identifier piece, a non-ASCII word; texts with non-ASCII characters and underscores
    vocabulary = Vocabulary(["bfloat16", "float16", "f16", "bf16\"", "fp16'", "bf16=", "fp16=", "half", ".half()", "+ ", "rope",
                             "x_half", "half_", "+=", "é16", "16:"])
    rng = random.Random(7)
    pieces = ["bfloat16", "float16", "bf16", "fp16", "\"", "'", "=", "half", ".half()", "+", " ", "x", "\n", "rop", "e",
              "_", "é", "\udcff", ":", "16"]
    for _ in range(600):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(0, 12)))
        words = TextWords(text, vocabulary)
        asked = list(vocabulary.inside)
        rng.shuffle(asked)
        assert {w: w in words for w in asked} == {w: w in text for w in asked}, text
        extra = rng.choice(["", " autocast", " bfloat16 float16 .half() bf16\" fp16\""])
        assert {w: w in words.plus(extra) for w in asked} == {w: w in text + extra for w in asked}, (text, extra)


def test_a_word_can_straddle_the_end_of_the_text_and_the_context_words():
    words = TextWords("x = 1  # +", vocabulary())
    assert "+ " not in words and "+ " in words.plus(" autocast")


def test_a_shared_piece_is_looked_for_first():
    gates = gates_for(["bf16\"", "bf16'", "bf16=", "fp16\""])
    assert gates["bf16\""] == "bf16"


def test_the_detectors_chosen_are_those_whose_triggers_occur():
    for path in sorted((Path(__file__).parents[1] / "rules").rglob("*.py"))[:200]:
        text = path.read_text()
        chosen = checks_for(TextWords(text, vocabulary()), None, True)
        assert chosen == [d for d in detectors("code") if d.applies(text)], path


def test_the_walk_indexes_every_node_but_the_shared_leaves():
    text = textwrap.dedent("""
        import torch
        class A:
            def f(self, x, y=torch.bfloat16):
                g = lambda z: z @ x
                return -x + y if not x < y else x.cos()
        async def h(*, a, b=1):
            global q
            d = {**a, "k": f"{b!r:>{a}}"}
            match d:
                case {"k": str(v)} | Point(x=0, y=v):
                    return [v async for v in a if v]
    """)
    src = SourceFile.parse("m.py", text)
    every = [n for n in ast.walk(src.tree) if n is not src.tree]
    shared = (ast.expr_context, ast.operator, ast.unaryop, ast.boolop, ast.cmpop)
    assert set(src.parents) == {n for n in every if not isinstance(n, shared)}
    assert all(child in list(ast.iter_child_nodes(parent)) for child, parent in src.parents.items())
    assert sorted(f.lineno for f in src.functions) == [4, 5, 7]
    assert len(src.matmuls) == 1 and [c.name for c in src.classes] == ["A"]


def test_the_walk_reads_the_fields_of_every_node_class_from_its_grammar_line():
    # Every class a parse can give carries its grammar line (``Call(expr func, expr* args, keyword* keywords)``);
    # the walk reads only the fields it names as nodes (not `ctx`, not a name or a number).
    concrete = [c for c in vars(ast).values() if isinstance(c, type) and issubclass(c, ast.AST) and c.__doc__
                and c.__doc__.split("(")[0] == c.__name__]
    assert len(concrete) > 90
    fields = {c.__name__: _child_fields(c) for c in concrete}
    assert fields["Call"] == (("func", False), ("args", True), ("keywords", True))
    assert fields["Attribute"] == (("value", False),) and fields["Name"] == () and fields["Pass"] == ()
    assert fields["Compare"] == (("left", False), ("comparators", True)) and fields["Global"] == ()


def test_a_package_that_does_not_parse_passes_no_precision_on(tmp_path):
    # The first phase summarises the package before it is parsed; once it turns out not to parse, the model is
    # built again without it, and the model file its re-export led to is judged as no trainer reaches it.
    train = TRAIN.replace("from pkg.rope import RotaryEmbedding", "from pkg import RotaryEmbedding")
    good = write(tmp_path / "good", {"pkg/__init__.py": "from .rope import RotaryEmbedding\n", "pkg/rope.py": ROPE, "train.py": train})
    assert [(f, line) for f, line, _ in amp101(lint(str(good)))] == [("rope.py", 11)]
    bad = write(tmp_path / "bad", {"pkg/__init__.py": "from .rope import RotaryEmbedding\nx = (\n", "pkg/rope.py": ROPE, "train.py": train})
    report = lint(str(bad), code=2)  # a file that does not parse fails the run, as in ruff; the rest is still checked
    assert amp101(report) == []
    assert [Path(e["file"]).name for e in report["errors"]] == ["__init__.py"]


def test_serial_and_parallel_project_lints_agree(tmp_path):
    files = {"pkg/__init__.py": "", "pkg/rope.py": ROPE, "train.py": TRAIN, "broken.py": "def f(:\n"}
    files.update({f"pkg/m{i:02d}.py": ROPE if i % 4 == 0 else "import torch\nx = torch.ones(3)\n" for i in range(30)})
    root = write(tmp_path / "proj", files)
    paths = sorted(root.rglob("*.py"))
    serial = lint_python_files(paths, jobs=1, roots=[root])
    parallel = lint_python_files(paths, jobs=2, roots=[root])
    assert parallel.findings == serial.findings and parallel.errors == serial.errors
    assert sorted(parallel.checked) == sorted(serial.checked)
    assert [f.location.line for f in serial.findings if f.rule_id == "AMP101" and f.location.file.endswith("rope.py")] == [11]


def test_a_file_is_summarised_once(tmp_path, monkeypatch):
    # The first phase's summary of a file that does not train in a precision is the one the second phase would
    # make (it reads the text alone): it is passed on, not made again.
    from ampdoctor.lint.python import runner

    made = []
    summarize = runner.summarize_file
    monkeypatch.setattr(runner, "summarize_file", lambda *a, **k: made.append(a[0]) or summarize(*a, **k))
    root = write(tmp_path / "proj", {"pkg/__init__.py": "", "pkg/rope.py": ROPE, "train.py": TRAIN, "util.py": "x = 1\n"})
    report = lint_python_files(sorted(root.rglob("*.py")), jobs=1, roots=[root])
    assert sorted(made) == sorted(["pkg/__init__.py", "pkg/rope.py", "train.py", "util.py"])
    assert [f.location.line for f in report.findings if f.rule_id == "AMP101"] == [11]


def test_a_node_class_without_a_grammar_line_is_walked_by_its_field_annotations():
    # Python 3.13 and later annotate every node class's fields; a Python whose docstrings no longer carry the grammar
    # line must still be walked, by those annotations, and the same fields come out.
    class Node(ast.AST):
        """A node class of some later Python, documented in prose."""
        _fields = ("func", "args", "name", "ctx", "default")
        _field_types = {"func": ast.expr, "args": list[ast.expr], "name": str, "ctx": ast.expr_context,
                        "default": ast.expr | None}

    assert _child_fields(Node) == (("func", False), ("args", True), ("default", False))
    assert _child_fields(ast.Call) == (("func", False), ("args", True), ("keywords", True))

    class Bare(ast.AST):
        """Neither."""
        _fields = ("value",)

    with pytest.raises(TypeError):
        _child_fields(Bare)


# --- the worker pool ---------------------------------------------------------------------------------------------
_LOADED: list[str] = []


def _what_was_loaded(_item: int) -> tuple[str, ...]:
    return tuple(_LOADED)


def test_workers_inherit_what_the_pool_loaded_before_they_started():
    # What every call needs (the rule modules) is loaded once in this process before the workers fork, not once in
    # each worker of each pool; a single process loads it where it needs it.
    from ampdoctor.lint.python import pool

    _LOADED.clear()
    results = pool.run(_what_was_loaded, [(i,) for i in range(pool.PARALLEL_MIN_FILES)], 2, warm=lambda: _LOADED.append("rules"))
    assert results == [("rules",)] * pool.PARALLEL_MIN_FILES
    _LOADED.clear()
    assert pool.run(_what_was_loaded, [(0,)], 2, warm=lambda: _LOADED.append("rules")) == [()]


class _CollectorState:
    """A result that, unpickled in the parent, becomes whether the parent's cycle collector ran at that moment."""

    def __reduce__(self):
        import gc

        return gc.isenabled, ()


def _a_result(_item: int) -> _CollectorState:
    return _CollectorState()


def test_results_come_back_with_the_cycle_collector_paused():
    # Thousands of results unpickled in a process whose heap holds a large library each start collections that walk
    # that heap; the results are acyclic, so the collector is paused while they arrive, and on again after.
    import gc

    from ampdoctor.lint.python import pool

    assert gc.isenabled()
    assert pool.run(_a_result, [(i,) for i in range(pool.PARALLEL_MIN_FILES)], 2) == [False] * pool.PARALLEL_MIN_FILES
    assert gc.isenabled()


_ATTENTION = textwrap.dedent('''
    import torch
    import torch.nn as nn


    class Attention(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.qkv = nn.Linear(dim, 3 * dim)

        def forward(self, x, attention_mask=None):
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            scores = q @ k.transpose(-2, -1) * 0.125
            if attention_mask is not None:
                mask = torch.zeros(scores.shape).masked_fill(attention_mask == 0, -1e9)
                scores = scores + mask
            (a, b), c = scores.softmax(-1), v
            return a @ c
''')


def test_a_linted_file_leaves_no_cycle_behind():
    # The lint pauses the cycle collector while it works (`pool`): anything of a file's analysis that is a reference
    # cycle (a closure that calls itself, holding the file's tables) would keep the file's whole tree alive until the
    # collector runs again, at the end of a chunk of hundreds of files, and that collection walks them all.
    import gc

    from ampdoctor.lint.python import lint_source

    assert lint_source(_ATTENTION, "model.py") is not None  # imports, caches: what the first file of a run loads
    gc.collect()
    gc.disable()
    try:
        src = SourceFile.parse("model.py", _ATTENTION)
        scores = next(n for n in ast.walk(src.tree) if isinstance(n, ast.Name) and n.id == "scores")
        assert src.bindings(scores, src.enclosing_function(scores))  # the assignments are indexed
        del src, scores
        lint_source(_ATTENTION, "model.py")
        left = gc.collect()
    finally:
        gc.enable()
    assert left == 0


def test_a_file_the_project_reaches_is_judged_once_by_the_rules_that_read_its_context(tmp_path, monkeypatch):
    # The second judgement's findings of the rules that read the project context replace the first's: the first
    # leaves those rules out instead of running them for nothing.
    from ampdoctor.lint.python import runner

    ran: list[tuple[str, str, str]] = []
    check = runner._check
    monkeypatch.setattr(runner, "_check", lambda ctx, checks, *a: ran.extend((Path(ctx.src.path).name, c.rule_id, c.fn.__name__)
                                                                            for c in checks) or check(ctx, checks, *a))
    # a bf16 cos table: AMP002 reads the project context and has its trigger words in the file alone
    rope = ROPE.replace('/ dim))\n', '/ dim))\n        freqs = torch.outer(torch.arange(2048).float(), self.inv_freq)\n'
                        '        self.register_buffer("cos_cached", freqs.cos().bfloat16(), persistent=False)\n')
    root = write(tmp_path / "proj", {"pkg/__init__.py": "", "pkg/rope.py": rope, "train.py": TRAIN})
    report = lint_python_files(sorted(root.rglob("*.py")), jobs=1, roots=[root])
    assert {(f.rule_id, f.location.line) for f in report.findings} >= {("AMP101", 13), ("AMP002", 10)}
    on_rope = [r for r in ran if r[:2] == ("rope.py", "AMP002")]
    assert on_rope and len(on_rope) == len(set(on_rope))  # each detector once


def test_the_signs_of_half_weights_are_looked_for_only_where_a_finding_depends_on_them(tmp_path, monkeypatch):
    # The pattern is costly on large files: a project none of whose files scales a loss or decomposes a tensor never
    # has it run; one that does reads its files until the first sign, and judges with what it found.
    from ampdoctor.lint.python import project

    looked = []
    sign = project.half_weights_sign
    monkeypatch.setattr(project, "half_weights_sign", lambda s: looked.append(1) or sign(s))
    files = {"pkg/__init__.py": "", "pkg/rope.py": ROPE, "train.py": TRAIN, "util.py": "x = 1\n"}
    root = write(tmp_path / "plain", files)
    lint_python_files(sorted(root.rglob("*.py")), jobs=1, roots=[root])
    assert looked == []
    scaler = ("import torch\nscaler = torch.amp.GradScaler('cuda')\nmodel = torch.nn.Linear(2, 2).half()\n"
              "opt = torch.optim.SGD(model.parameters())\nscaler.step(opt)\nopt.step()\n")
    root = write(tmp_path / "scaled", {**files, "amp.py": scaler})
    lint_python_files(sorted(root.rglob("*.py")), jobs=1, roots=[root])
    assert looked


def test_a_half_weights_sign_names_the_model_the_cast_is_made_on():
    from ampdoctor.lint.python.project import half_weights_sign

    # the receiver of `.half()` is read from where an identifier (or a call's closing parenthesis) begins
    assert half_weights_sign("net = build()\nmodel.encoder.half()\n")["receiver"] == "model.encoder"
    assert half_weights_sign("y = Net().half()\n")["receiver"] == ")"
    assert half_weights_sign("x = mel.half()\n") is None
