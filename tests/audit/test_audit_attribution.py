"""Where a runtime finding happened and whose code it is about: the line that did it (an installed library's when
the library did it), findings inside libraries kept apart as notes, one finding per crash, one per repeated line,
and buffers scanned in modules whose forward never runs."""

import importlib
import sys
import textwrap

import pytest
import torch
import torch.nn as nn

from ampdoctor.audit import audit
from ampdoctor.core import Severity
from ampdoctor.report import render_json, render_text
from ampdoctor.report.sarif import report_to_sarif

LAYER = '''
import torch
import torch.nn as nn


class Mixer(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(16, 16))

    def forward(self, x):
        return torch.mm(x, self.weight)  # the matmul line
'''


def _package(root, name):
    """A package `name` with the module `layer.py` (LAYER) under `root`, imported fresh."""
    pkg = root / name
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "layer.py").write_text(textwrap.dedent(LAYER))
    sys.path.insert(0, str(root))
    try:
        sys.modules.pop(name, None)
        sys.modules.pop(f"{name}.layer", None)
        return importlib.import_module(f"{name}.layer")
    finally:
        sys.path.remove(str(root))


def _line(text):
    with open(__file__, encoding="utf-8") as fh:
        return next(n for n, line in enumerate(fh, 1) if text in line and "_line(" not in line)


def _fp32_matmuls(layer):
    model = nn.Sequential(layer.Mixer(), layer.Mixer())
    with audit("bf16-mixed") as a:  # no autocast: the matmuls run in fp32
        model(torch.randn(4, 16)).sum().backward()  # the user's call
    return a.report, [f for f in a.report.findings if f.rule_id == "AMP203"]


def test_a_finding_inside_an_installed_library_is_a_note_at_the_library_line(tmp_path):
    layer = _package(tmp_path / "lib" / "python3" / "site-packages", "fakelib")
    report, [f] = _fp32_matmuls(layer)
    assert f.library == "fakelib" and f.severity is Severity.INFO and f.details["rule_severity"] == "warning"
    assert f.location.file.endswith("fakelib/layer.py") and f.location.line == 12  # forward and backward: the mm line
    assert f.message.startswith("inside fakelib's layer.py: ")
    # both layers, forward and backward (placed at the line that built the backward's node): one finding
    assert f.details["count"] == 4 and f.details["modules"] == ["0", "1"]
    user = [r for r in f.related if r.label == "called from your code here"]
    assert len(user) == 1 and user[0].file.endswith("test_audit_attribution.py") and user[0].line == _line("# the user's call")
    assert report.user_findings == () and report.library_findings == (f,)
    # kept apart in every format
    text = render_text(report, width=1000)
    assert "inside installed libraries" in text and "(1 of them inside installed libraries)" in text
    assert '"library": "fakelib"' in render_json(report)
    [result] = [r for r in report_to_sarif(report)["runs"][0]["results"] if r["ruleId"] == "AMP203"]
    assert (result["properties"], result["level"]) == ({"library": "fakelib"}, "note")


def test_the_same_code_in_the_users_tree_keeps_its_severity(tmp_path):
    layer = _package(tmp_path / "project", "mymodel")
    _, [f] = _fp32_matmuls(layer)
    assert f.library is None and f.severity is Severity.WARNING and f.location.file.endswith("mymodel/layer.py")


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(8, 24)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = torch.bmm(q, k.transpose(1, 2)) * self.scale  # the fp32 scale drags the scores to fp32
        return torch.bmm(scores.softmax(dim=-1), v)  # fp32 probs meet bf16 v: the step fails here


def test_a_crash_is_one_finding_with_its_chain():
    model = Attention().to(torch.bfloat16)
    model.scale = torch.full((1, 4, 4), 0.5)  # fp32, set after the cast
    with pytest.raises(RuntimeError):
        with audit("bf16-true") as a:
            model(torch.randn(2, 4, 8, dtype=torch.bfloat16)).float().sum().backward()
    serious = [f for f in a.report.findings if f.severity is not Severity.INFO]
    assert len(serious) == 1, [(f.rule_id, f.severity, str(f.location)) for f in a.report.findings]
    [root] = serious
    assert root.details["root_cause"] is True and root.location.op == "aten::bmm" and root.origin.op == "aten::mul"
    assert any(x.startswith("AMP201 implicit-dtype-promotion at ") for x in root.details["folded"])
    # explain's readings of the error text are named on the root cause, not listed as notes of their own
    assert [f for f in a.report.findings if "none of what usually comes with it" in f.message] == []


class BufferOnly(nn.Module):
    """A LightningModule-like model: the step uses its buffer and a child, never `self(...)`."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.register_buffer("inv_freq", (1.0 / 10000 ** (torch.arange(0, 8, 2).float() / 8)).to(torch.bfloat16), persistent=False)

    def training_step(self, x):
        angles = torch.outer(torch.arange(4).float(), self.inv_freq.float())
        return (self.proj(x) * angles.cos().repeat(1, 2)).sum()


def test_a_module_whose_forward_never_runs_has_its_buffers_scanned():
    model = BufferOnly()
    with audit("bf16-mixed", model=model) as a:
        model.training_step(torch.randn(4, 8)).backward()
    found = [f for f in a.report.findings if f.rule_id == "AMP002"]
    assert [(f.location.module, "inv_freq" in f.message) for f in found] == [("", True)]
    # the module table still lists only modules that ran
    assert [row[0] for row in a.report.tables[0].rows] == ["proj", "<outside modules>"]


class Rotary(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / 10000 ** (torch.arange(0, 8, 2).float() / 8))

    def forward(self, x):
        angles = torch.outer(torch.arange(x.shape[0], dtype=torch.float32), self.inv_freq.float())
        return x * angles.cos().repeat(1, 2).to(x.dtype)


class Stack(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.blocks = nn.ModuleList(nn.ModuleDict({"rope": Rotary(), "proj": nn.Linear(8, 8)}) for _ in range(layers))
        self.head_rope = Rotary()

    def forward(self, x):
        for block in self.blocks:
            x = block["proj"](block["rope"](x))
        return self.head_rope(x)


def test_a_buffer_finding_told_for_each_layer_is_one_finding_naming_the_layers():
    # `model.to(bf16)` makes every layer's inv_freq bf16: one finding for the blocks (their module paths differ only
    # in the layer number), and the rotary outside the blocks is its own finding
    model = Stack(layers=3).to(torch.bfloat16)
    with audit("bf16-true", model=model) as a:
        model(torch.randn(4, 8, dtype=torch.bfloat16)).float().sum().backward()
    found = [f for f in a.report.findings if f.rule_id == "AMP002"]
    assert [f.location.module for f in found] == ["blocks.0.rope", "head_rope"]
    assert found[0].details["count"] == 3 and found[0].details["modules"] == ["blocks.0.rope", "blocks.1.rope", "blocks.2.rope"]
    assert found[0].message.endswith("[the same in 3 copies of this module: blocks.0.rope, blocks.1.rope, blocks.2.rope]")
    assert "count" not in found[1].details


def test_buffer_findings_of_numbered_top_level_modules_group_by_their_path_only():
    # a Sequential of rotaries names its modules 0..11: only the path is generalised, never the digits of "bf16"
    # or a shape, so all twelve are one finding
    model = nn.Sequential(*(Rotary() for _ in range(12))).to(torch.bfloat16)
    with audit("bf16-true", model=model) as a:
        model(torch.randn(4, 8, dtype=torch.bfloat16))
    [found] = [f for f in a.report.findings if f.rule_id == "AMP002" and f.location.line is None]
    assert found.details["count"] == 12 and "is bf16" in found.message


class MaskedAttention(nn.Module):
    """Rotary attention whose bf16 model meets an fp32 additive mask: the crash is the mask's."""

    def __init__(self):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8)
        self.rope = Rotary()

    def forward(self, x, mask):
        q, k = self.rope(self.q(x)), self.rope(self.k(x))
        return torch.softmax(q @ k.t() + mask, -1) @ self.v(x)


def test_a_crash_folds_no_buffer_finding_that_is_not_on_its_chain():
    # the bmm fails on the fp32 probabilities the fp32 mask made; the rotary tables rotated the bf16 queries whose
    # scores met the mask, so they are upstream of the probabilities but not of the stray dtype: their bf16
    # inv_freq is a second defect and stays a finding of its own
    model = nn.ModuleList([MaskedAttention(), MaskedAttention()]).to(torch.bfloat16)
    x, mask = torch.randn(4, 8, dtype=torch.bfloat16), torch.zeros(4, 4).masked_fill(torch.ones(4, 4, dtype=torch.bool).triu(1), -1e4)
    with pytest.raises(RuntimeError):
        with audit("bf16-true", model=model) as a:
            model[1](model[0](x, mask), mask)
    [root] = [f for f in a.report.findings if f.details.get("root_cause")]
    assert root.rule_id == "AMP201" and not any(x.startswith("AMP002") for x in root.details.get("folded", []))
    [table] = [f for f in a.report.findings if f.rule_id == "AMP002"]
    assert table.severity is Severity.WARNING and table.details["tensor"].endswith("rope.inv_freq")


def test_audit_of_a_config_places_findings_in_the_library_never_in_whatever_called_ampdoctor(tmp_path):
    # `ampdoctor audit --hf-config` runs the step (and its backward) from ampdoctor's own code: the code that called
    # ampdoctor (its console script; here, this test) is nobody's line for an op.
    pytest.importorskip("transformers")
    import json

    from ampdoctor.cli import main

    cfg = tmp_path / "config.json"
    # CPM-Ant's relative position buckets take log(0) in the library's forward: a finding there to place. (GPT-2's
    # dropout used to give one, through fp32 matmuls of CPU's SDPA math path; those are the kernel's, no finding.)
    cfg.write_text(json.dumps({"model_type": "cpmant", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "dim_head": 16,
                               "dim_ff": 128, "vocab_size": 256, "max_position_embeddings": 64, "bos_token_id": 1, "eos_token_id": 2,
                               "pad_token_id": 0}))
    out = tmp_path / "report.json"
    assert main(["audit", "--hf-config", str(cfg), "--seq-len", "16", "--batch-size", "2", "--format", "json", "-o", str(out)]) == 0
    findings = json.loads(out.read_text())["findings"]
    assert findings and all(f["library"] == "transformers" and f["severity"] == "info" for f in findings)
    places = [loc["file"] for f in findings for loc in (f["location"], *f["related"]) if loc["file"]]
    assert places and all("site-packages" in p and "transformers" in p for p in places), places


def test_a_crash_inside_a_library_stays_the_users_error_with_the_users_call(tmp_path):
    pkg = tmp_path / "lib" / "python3" / "site-packages" / "crashlib"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "attn.py").write_text(textwrap.dedent('''
        import torch
        import torch.nn as nn


        class Attention(nn.Module):
            def __init__(self):
                super().__init__()
                self.qkv = nn.Linear(8, 24)

            def forward(self, x, scale):
                q, k, v = self.qkv(x).chunk(3, dim=-1)
                scores = torch.bmm(q, k.transpose(1, 2)) * scale
                return torch.bmm(scores.softmax(dim=-1), v)
    '''))
    sys.path.insert(0, str(pkg.parent))
    try:
        sys.modules.pop("crashlib", None)
        sys.modules.pop("crashlib.attn", None)
        attn = importlib.import_module("crashlib.attn")
    finally:
        sys.path.remove(str(pkg.parent))
    model = attn.Attention().to(torch.bfloat16)
    with pytest.raises(RuntimeError):
        with audit("bf16-true") as a:
            model(torch.randn(2, 4, 8, dtype=torch.bfloat16), torch.full((1, 4, 4), 0.5))  # the user's fp32 scale
    [root] = [f for f in a.report.findings if f.severity is not Severity.INFO]
    assert root.library is None and root.details["root_cause"] is True and root.location.file.endswith("crashlib/attn.py")
    assert [r.file.endswith("test_audit_attribution.py") for r in root.related if r.label == "called from your code here"] == [True]


def _input_not_cast():  # the incidents' "expected scalar type BFloat16 but found Float" at a linear layer
    nn.Linear(8, 8).to(torch.bfloat16)(torch.randn(2, 8)).sum().backward()


def _fp32_grad_on_bf16_param():  # gradients kept in fp32 for bf16 weights ("Expected BFloat16, got Float")
    m = nn.Linear(8, 8).to(torch.bfloat16)
    m(torch.randn(2, 8, dtype=torch.bfloat16)).float().sum().backward()
    for p in m.parameters():
        p.grad = p.grad.float()


def _rotary_input_upcast():  # q upcast to fp32, the table left bf16: the product is fp32 and the next layer fails
    q = torch.randn(2, 4, 8)
    cos = torch.randn(4, 8, dtype=torch.bfloat16)
    nn.Linear(8, 8).to(torch.bfloat16)(q * cos).sum().backward()


@pytest.mark.parametrize("step", [_input_not_cast, _fp32_grad_on_bf16_param, _rotary_input_upcast])
def test_each_kind_of_dtype_crash_is_exactly_one_serious_finding(step):
    with pytest.raises(RuntimeError):
        with audit("bf16-true") as a:
            step()
    serious = [(f.rule_id, f.severity.value) for f in a.report.findings if f.severity is not Severity.INFO]
    assert len(serious) == 1 and serious[0][1] == "error", serious


def test_a_shape_error_where_a_rotary_table_meets_queries_is_no_dtype_finding():
    # A model's own shape bug (a table built for 8 heads, queries of 4) fails where bf16 queries meet the fp32
    # cos table: the dtypes differ there, but they are not why it failed.
    q = torch.randn(1, 6, 4, 8, dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match="must match the size"):
        with audit("bf16-mixed") as a:
            angles = torch.outer(torch.arange(6).float(), torch.ones(8))
            cos = angles.cos().view(1, 6, 1, 8).expand(1, 6, 8, 8)
            (q * cos).float().sum().backward()
    assert [f.rule_id for f in a.report.findings if f.severity is not Severity.INFO] == []


class _UpcastNorm(nn.Module):
    """A norm that upcasts its own weight and keeps its input's dtype (Gemma's shape)."""

    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6) * (1.0 + self.weight.float())


def test_fp32_embeddings_through_a_weight_upcasting_norm_are_the_unconverted_input():
    # Embeddings from an fp32 projector enter a bf16 model; its norm multiplies them by an upcast weight and the
    # fp32 product meets the first bf16 projection. The cause is the input, not the norm's weight upcast.
    model = nn.Sequential(_UpcastNorm(16), nn.Linear(16, 16)).to(torch.bfloat16)
    embeds = nn.Linear(8, 16)(torch.randn(2, 4, 8)).detach()
    with pytest.raises(RuntimeError):
        with audit("bf16-true", model=model) as a:
            model(embeds).float().sum().backward()
    assert [(f.rule_id, f.severity.value) for f in a.report.findings if f.severity is not Severity.INFO] == [("AMP131", "error")]


class _TableFollowsInput(nn.Module):
    """A position table that follows its input's dtype and is stored back (CTRL's shape)."""

    def __init__(self, dim):
        super().__init__()
        self.register_buffer("table", torch.randn(8, dim), persistent=False)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        self.table = self.table.to(dtype=x.dtype)
        return self.norm(x + self.table[: x.shape[1]])


@pytest.mark.parametrize("watched", [True, False], ids=["model-given", "model-found"])
def test_a_buffer_recast_to_the_input_dtype_and_stored_back_leaves_the_input_the_cause(watched):
    # The model was cast to bf16 before the audit; during the step the buffer is replaced by its fp32 cast. The
    # replaced bf16 tensor is still the model's (scanned when the step began), so the fp32 operand is the input's.
    model = _TableFollowsInput(16).to(torch.bfloat16)
    with pytest.raises(RuntimeError):
        with audit("bf16-true", model=model if watched else None) as a:
            model(torch.randn(2, 4, 16)).float().sum().backward()
    assert [(f.rule_id, f.severity.value) for f in a.report.findings if f.severity is not Severity.INFO] == [("AMP131", "error")]


class _LoraLinear(nn.Module):
    """A LoRA layer written for fp32 adapters: it upcasts its input for them."""

    def __init__(self, dim, rank=4):
        super().__init__()
        self.base = nn.Linear(dim, dim)
        self.lora_A = nn.Linear(dim, rank, bias=False)
        self.lora_B = nn.Linear(rank, dim, bias=False)

    def forward(self, x):
        return self.base(x) + self.lora_B(self.lora_A(x.float())).to(x.dtype)


_LORA_UPCAST_LINE = _LoraLinear.forward.__code__.co_firstlineno + 1


def test_an_adapter_given_an_input_the_model_upcast_is_the_adapter_boundary_with_the_cast_beside_it():
    # The whole model, adapters included, was cast to bf16; the layer's own upcast feeds fp32 into bf16 adapter
    # weights. The root cause names the adapter and points at the cast, not only at the failing matmul.
    model = nn.Sequential(nn.Linear(16, 16), _LoraLinear(16)).to(torch.bfloat16)
    with pytest.raises(RuntimeError):
        with audit("bf16-true", model=model) as a:
            model(torch.randn(4, 16, dtype=torch.bfloat16)).float().sum().backward()
    [root] = [f for f in a.report.findings if f.severity is not Severity.INFO]
    assert root.rule_id == "AMP127" and "adapter 1.lora_A" in root.message
    assert [(r.line, r.op, r.label) for r in root.related] == [(_LORA_UPCAST_LINE, "aten::_to_copy", "made fp32 here")]
