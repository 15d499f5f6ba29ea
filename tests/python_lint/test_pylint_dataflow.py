"""The dtype dataflow layer on its own: what names and tensors resolve to, and fp16 gate polarity."""

import ast
import textwrap

from ampdoctor.lint.python.dataflow import Dataflow
from ampdoctor.lint.python.source import SourceFile


def last_value(code: str):
    src = SourceFile.parse("t.py", textwrap.dedent(code))
    stmt = src.tree.body[-1]
    return Dataflow(src), stmt.value


def test_dtype_names_resolve_through_assignments_ifexp_dicts_and_getattr():
    cases = {
        "import torch as T\nD = T.bfloat16\nx = D": {"bf16"},
        "import torch\nd = torch.bfloat16 if args.bf16 else torch.float16\nx = d": {"bf16", "fp16"},
        "import torch\nd = torch.float32\nif args.bf16:\n    d = torch.bfloat16\nx = d": {"bf16", "fp32"},
        "import torch\nDT = {'bf16': torch.bfloat16, 'fp32': torch.float32}\nx = DT[args.precision]": {"bf16", "fp32"},
        "import torch\nx = getattr(torch, 'float16')": {"fp16"},
        "from torch import half\nx = half": {"fp16"},
        "import torch\nd = getattr(torch, args.dtype)\nx = d": None,
    }
    for code, expected in cases.items():
        flow, value = last_value(code)
        got = flow.dtype_of(value)
        assert (set(got) if got is not None else None) == expected, code


def test_tensor_dtypes_follow_casts_and_the_last_assignment():
    cases = {
        "x = y.bfloat16().view(2, -1).cpu()": {"bf16"},
        "import torch\nx = y.to('cuda', torch.float16)": {"fp16"},
        "a = y.float()\nx = z.type_as(a)": {"fp32"},
        "logits = head(h)\nlogits = logits.float()\nx = logits[:, -1]": {"fp32"},
        "x = y.to(device)": None,
    }
    for code, expected in cases.items():
        flow, value = last_value(code)
        got = flow.tensor_dtype(value)
        assert (set(got) if got is not None else None) == expected, code


def test_fp16_polarity_of_conditions():
    cases = {
        "import torch\nx = dtype == torch.float16": 1,
        "import torch\nx = dtype != torch.bfloat16": 1,
        "import torch\nx = dtype == torch.bfloat16": -1,
        "x = args.fp16": 1,
        "x = not args.bf16": 1,
        "x = cfg.precision in ('16-mixed', 'fp16')": 1,
        "x = use_amp and args.fp16": 1,
        "x = args.mixed_precision": 0,
        "use = args.precision == 'fp16'\nx = use": 1,
    }
    for code, expected in cases.items():
        flow, value = last_value(code)
        assert flow.fp16_polarity(value) == expected, code
    assert isinstance(value, ast.Name)


def _facts(code: str):
    from ampdoctor.lint.python.facts import Facts

    src = SourceFile.parse("train.py", textwrap.dedent(code))
    return Facts(src, Dataflow(src))


def test_a_half_mode_a_run_may_choose_is_mixed_precision_but_only_a_default_one_is_on():
    # `mixed_precision` (may) serves rules that fire under autocast; `mixed_precision_on` (a run that names no
    # option) serves rules that autocast makes moot: an offered half mode must not silence those.
    offered = _facts("""
        import argparse
        from accelerate import Accelerator
        p = argparse.ArgumentParser()
        p.add_argument("--mixed_precision", default="no", choices=["no", "fp16", "bf16"])
        p.add_argument("--bf16", action="store_true")
        args = p.parse_args()
        Accelerator(mixed_precision=args.mixed_precision)
        TrainingArguments(bf16=args.bf16, fp16=True if args.x else False)
    """)
    assert len(offered.mixed_precision) == 2 and offered.mixed_precision_on == []
    by_default = _facts("""
        import argparse
        from accelerate import Accelerator
        p = argparse.ArgumentParser()
        p.add_argument("--mixed_precision", default="bf16", choices=["no", "bf16"])
        args = p.parse_args()
        Accelerator(mixed_precision=args.mixed_precision)
        TrainingArguments(bf16=True if args.y else True)
    """)
    assert sorted(c.lineno for c in by_default.mixed_precision_on) == [7, 8]


def _runs_facts(code: str, runs=()):
    from ampdoctor.lint.python.facts import Facts

    src = SourceFile.parse("train.py", textwrap.dedent(code))
    return src, Facts(src, Dataflow(src), runs=runs)


def _reduce_expr(src):
    return next(kw.value for n in ast.walk(src.tree) if isinstance(n, ast.Call) for kw in n.keywords if kw.arg == "reduce_dtype")


RUN_CHOSEN = """
    import argparse, torch
    from torch.distributed.fsdp import MixedPrecision
    TABLE = {"fp32": torch.float32, "bf16": torch.bfloat16}
    p = argparse.ArgumentParser()
    p.add_argument("--precision", default="bf16")
    p.add_argument("--grad_precision", choices=["fp32", "bf16"])
    p.add_argument("--pure", action="store_true")
    args = p.parse_args()
    MixedPrecision(reduce_dtype=torch.bfloat16 if args.pure else TABLE[args.grad_precision or args.precision])
"""


def test_a_run_chosen_dtype_is_read_in_each_run_the_project_makes():
    src, facts = _runs_facts(RUN_CHOSEN)
    assert facts.dtypes_per_run(_reduce_expr(src)) == [(None, frozenset({"bf16"}))]  # the script's defaults
    runs = (("scripts/a.sh:3", (("grad_precision", "fp32", True),)),
            ("scripts/b.sh:5", (("pure", True, True), ("grad_precision", "fp32", True))),
            ("scripts/c.sh:2", (("precision", "fp32", True),)))
    src, facts = _runs_facts(RUN_CHOSEN, runs)
    assert facts.dtypes_per_run(_reduce_expr(src)) == [
        ("scripts/a.sh:3", frozenset({"fp32"})), ("scripts/b.sh:5", frozenset({"bf16"})), ("scripts/c.sh:2", frozenset({"fp32"}))]
    # a value read from a shell variable is not known, unless an option read before it decides the run
    shell = (("scripts/d.sh:1", (("precision", "bf16", False),)),)
    src, facts = _runs_facts(RUN_CHOSEN, shell)
    assert facts.dtypes_per_run(_reduce_expr(src)) is None
    src, facts = _runs_facts(RUN_CHOSEN, (("scripts/d.sh:1", (("precision", "bf16", False), ("grad_precision", "fp32", True))),))
    assert facts.dtypes_per_run(_reduce_expr(src)) == [("scripts/d.sh:1", frozenset({"fp32"}))]


def test_a_dtype_no_run_decides_is_not_known():
    # a parameter, a comparison the runs do not fix: what it may be is not what a run holds
    for code in ("""
        import torch
        from torch.distributed.fsdp import MixedPrecision
        def policy(precision):
            dtype = torch.bfloat16 if precision == "bf16-mixed" else torch.float32
            return MixedPrecision(reduce_dtype=dtype)
    """, """
        import torch
        from torch.distributed.fsdp import MixedPrecision
        def policy(cfg):
            return MixedPrecision(reduce_dtype={"fp32": torch.float32, "bf16": torch.bfloat16}[cfg.reduce])
    """):
        src, facts = _runs_facts(code)
        assert facts.dtypes_per_run(_reduce_expr(src)) is None, code


def test_a_dtype_test_is_decided_only_where_every_value_the_file_shows_agrees():
    def decided(code: str):
        src = SourceFile.parse("t.py", textwrap.dedent(code))
        test = next(n for n in ast.walk(src.tree) if isinstance(n, ast.If)).test
        return Dataflow(src).decided(test, src.scope(test))

    rotary = textwrap.dedent("""
        import torch
        class R:
            def __init__(self, precision=torch.half):
                self.precision = precision
            def forward(self):
                if self.precision == torch.bfloat16:
                    pass
        """)
    assert decided(rotary + "r = R(precision=torch.half)\n") is False
    assert decided(rotary + "r = R()\n") is False  # the default, where the file makes every instance
    assert decided(rotary + "r = R(precision=torch.bfloat16)\n") is True
    assert decided(rotary + "r = R(precision=torch.half)\ns = R(precision=torch.bfloat16)\n") is None
    assert decided(rotary) is None  # never built here: another file may pass anything
    assert decided(rotary + "r = R()\nsetattr(r, 'precision', torch.bfloat16)\n") is None
    assert decided(rotary + "r = R(p)\n") is None  # a value that means nothing in the callee
    loop = """
        import torch
        dtype = torch.float32
        for dtype in (torch.float16, torch.bfloat16):
            if dtype == torch.bfloat16:
                pass
        """
    assert decided(loop) is None
    assert decided("import torch\ndtype = torch.float32\nif dtype != torch.bfloat16:\n    pass\n") is True
    assert decided("import torch\nif args.dtype == torch.bfloat16:\n    pass\n") is None
    # a configurator run with exec may rebind `dtype` from the command line (nanoGPT's)
    assert decided("import torch\ndtype = torch.float32\nexec(open('configurator.py').read())\nif dtype == torch.bfloat16:\n    pass\n") is None


def test_the_assignments_a_use_may_read_stop_at_one_that_always_ran():
    code = """
    def f(flag, items):
        x = 1
        x = 2
        if flag:
            x = 3
        else:
            x = 4
        use(x)
        y = 1
        for i in items:
            y = 2
        use(y)
        z = 1
        if flag:
            z = 2
            use(z)
        try:
            w = 1
        except ValueError:
            w = 2
        use(w)
        if flag:
            v = 1
        else:
            v = 2
            v = 3
        use(v)
    """
    src = SourceFile.parse("t.py", textwrap.dedent(code))
    fn = src.tree.body[0]
    uses = {c.args[0].id: c.args[0] for c in src.calls if ast.unparse(c.func) == "use"}
    read = {name: [ast.unparse(v) for _, v in src.reaching(use, fn)] for name, use in uses.items()}
    # both sides of the if, then the assignment above it that always ran
    assert read["x"] == ["4", "3", "2"]
    # a loop body may not run
    assert read["y"] == ["2", "1"]
    # inside the branch that assigned it, the branch's own assignment is the one
    assert read["z"] == ["2"]
    # a handler runs instead of the rest of the try body, and either may have run
    assert read["w"] == ["2", "1"]
    # one a later assignment of its branch overwrites is read by nothing
    assert read["v"] == ["3", "1"]


def test_an_autocast_to_an_fp32_attribute_turns_autocast_off():
    from ampdoctor.lint.python.facts import disables_autocast

    code = """
    import torch

    class Backbone(torch.nn.Module):
        def __init__(self, half):
            super().__init__()
            self.precision = torch.float32
            self.compute = torch.bfloat16 if half else torch.float32

        def forward(self, x):
            with torch.cuda.amp.autocast(dtype=self.precision):
                y = x
            with torch.autocast("cuda", dtype=self.compute):
                return y
    """
    src = SourceFile.parse("t.py", textwrap.dedent(code))
    first, second = sorted((c for c in src.calls if "autocast" in ast.unparse(c.func)), key=lambda c: c.lineno)
    # every assignment of the attribute is fp32: a region kept in fp32
    assert disables_autocast(first, src)
    # one that may be bf16 is not
    assert not disables_autocast(second, src)
