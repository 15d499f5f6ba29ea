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
