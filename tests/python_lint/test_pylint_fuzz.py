"""The linter never raises on arbitrary input: generated Python built from AMP-flavoured fragments, and bytes."""

import os
import string
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ampdoctor.lint.python import lint_source
from ampdoctor.lint.python.runner import lint_file
from ampdoctor.report import ErrorKind

NAMES = ["torch", "T", "x", "cos", "freqs", "model", "scaler", "p.grad", "self.cos_cached", "dtype", "args.fp16", "F"]
EXPRS = [
    "torch.bfloat16", "torch.float16", "torch.float32", "x.bfloat16()", "x.to(dtype)", "freqs.cos().half()",
    "torch.arange(n, dtype=dtype)", "torch.amp.GradScaler('cuda')", "torch.cuda.amp.GradScaler(enabled=args.fp16)",
    "torch.autocast('cuda')", "F.softmax(att, dim=-1)", "F.cross_entropy(logits, y)", "apply_rotary_emb(x.float(), cos, sin)",
    "model.to(torch.bfloat16)", "torch.optim.AdamW(model.parameters())", "x.numpy()", "(a @ inv_freq)", "None",
    "torch.bfloat16 if args.bf16 else torch.float16", "{'bf16': torch.bfloat16}[k]", "getattr(torch, 'half')",
    "p.grad.data.float()", "MixedPrecision(param_dtype=dtype)", "lambda: x", "[y for y in x]",
]
HEADER = "import torch\nimport torch.nn.functional as F\nfrom torch.distributed.fsdp import MixedPrecision\n"


@st.composite
def programs(draw) -> str:
    lines = [HEADER]
    indent = 0
    for _ in range(draw(st.integers(1, 25))):
        kind = draw(st.sampled_from(["assign", "expr", "if", "with", "def", "class", "dedent", "for"]))
        pad = "    " * indent
        if kind == "assign":
            lines.append(f"{pad}{draw(st.sampled_from(NAMES))} = {draw(st.sampled_from(EXPRS))}")
        elif kind == "expr":
            lines.append(f"{pad}{draw(st.sampled_from(EXPRS))}")
        elif kind in ("if", "with", "def", "class", "for") and indent < 6:
            head = {"if": f"if {draw(st.sampled_from(EXPRS))}:", "with": f"with {draw(st.sampled_from(EXPRS))}:",
                    "def": "def forward(self, x):", "class": "class M(torch.autograd.Function):", "for": "for p in model.parameters():"}[kind]
            lines += [f"{pad}{head}", f"{pad}    pass"]
            indent += 1
        elif kind == "dedent" and indent:
            indent -= 1
    return "\n".join(lines) + "\n"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_generated_programs_lint_without_exceptions(code):
    findings, error = lint_source(code)
    assert error is None
    for f in findings:
        assert f.location.line is not None and 1 <= f.location.line <= code.count("\n") + 1


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=string.printable + "ßλ\x00", max_size=300))
def test_random_text_never_raises(text):
    findings, error = lint_source("import torch\n" + text)
    # Random text that happens to be valid only in a newer Python (a multi-line f-string) is said so, not raised.
    assert error is None or error.kind in (ErrorKind.SYNTAX, ErrorKind.NEWER_SYNTAX) or error.message.startswith("too deeply nested")


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_never_raise(data):
    with tempfile.NamedTemporaryFile("wb", suffix=".py", delete=False) as handle:
        handle.write(b"torch.bfloat16 GradScaler autocast\n" + data)
    try:
        path, findings, error, _ = lint_file(handle.name)
        assert error is None or error.message.startswith(("syntax error", "cannot read", "too deeply"))
    finally:
        os.unlink(handle.name)
