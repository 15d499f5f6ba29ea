"""The five motivating incidents, reproduced as CPU scripts and audited like `ampdoctor run` does."""

import torch

from ampdoctor.audit.runner import run
from ampdoctor.core import Severity


def by_name(report, name):
    return [f for f in report.findings if f.name == name]


def test_incident1_bmm_failure_is_traced_back_to_the_rotary_promotion(incident, line_of):
    path = incident("incident1_neox_rotary.py")
    result = run(path, policy="bf16-true", max_steps=None)
    assert result.exit_code == 1 and isinstance(result.exception, RuntimeError)
    chain = [f for f in by_name(result.report, "implicit-dtype-promotion") if f.severity is Severity.ERROR and f.origin is not None]
    assert len(chain) == 1
    f = chain[0]
    assert (f.location.module, f.location.op, f.location.phase) == ("blocks.0.attn", "aten::bmm", "forward")
    assert f.location.line == line_of(path, "context = torch.bmm(probs, v)")
    assert "aten::bmm failed on fp32, bf16 inputs" in f.message
    assert (f.origin.module, f.origin.op) == ("blocks.0.attn", "aten::mul")
    assert f.origin.line == line_of(path, "q = q * cos + rotate_half(q) * sin")
    assert [(r.module, r.op) for r in f.related] == [("blocks.0.attn.pos_enc", "aten::cos")]
    assert f.related[0].line == line_of(path, "self.cos_cached = emb.cos()")
    # One failure, one finding: the chain leads the report as its only error; explain's diagnosis of the text
    # (the incident's own rule) is named on it, and the findings about ops on its chain (the rotary mul, the fp32
    # bmm it fed) are folded into it.
    errors = [x for x in result.report.findings if x.severity is Severity.ERROR]
    assert errors == [f] and result.report.findings[0] is f
    assert f.details["root_cause"] is True and "AMP001" in f.details["also_matches"]
    assert by_name(result.report, "precision-config-mismatch") == [] and by_name(result.report, "rope-dtype-mismatch") == []
    # The fp32 cos is computed from each layer's inv_freq, which the bf16 cast made bf16: those buffer findings are
    # about the chain's own tensors, so they fold in too, and the crash is the run's one warning-or-error finding.
    assert [x.split(" at ")[0] for x in f.details["folded"]] == ["AMP002 rope-cache-low-precision", "AMP002 rope-cache-low-precision",
                                                               "AMP005 rope-dtype-mismatch", "AMP201 implicit-dtype-promotion",
                                                               "AMP203 fp32-matmul-in-bf16-policy"]
    assert [x for x in result.report.findings if x.severity is not Severity.INFO] == [f]


def test_incident3_fp32_grad_of_bf16_params_is_found_from_grad_dtypes(incident, line_of):
    path = incident("incident3_grad_precision.py")
    result = run(path, policy="bf16-mixed", max_steps=None)
    assert result.exit_code == 0  # torch 2.13 accumulates into the fp32 .grad, and SGD steps the mixed pair
    [f] = by_name(result.report, "grad-dtype-mismatch")
    assert f.severity is Severity.WARNING  # nothing failed (an Adam-family step would have: an error then)
    assert f.details["params"] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert f.details["grad"] == "fp32" and f.details["param"] == "bf16" and f.details["accumulated"] is True
    assert f.location.line == line_of(path, "param.grad.data = param.grad.data.to(torch.float32)")
    assert f.location.phase == "optimizer"


def test_incident4_grad_scaler_with_bf16_is_reported_although_cpu_runs_it(incident, line_of):
    path = incident("incident4_gradscaler_bf16.py")
    result = run(path, policy="bf16-mixed", max_steps=None)
    assert result.exit_code == 0
    [f] = by_name(result.report, "grad-scaler-with-bf16")
    assert f.severity is Severity.ERROR
    assert f.location.op == "aten::_amp_foreach_non_finite_check_and_unscale_"
    assert f.location.phase == "optimizer"
    assert f.location.line == line_of(path, "scaler.step(optimizer)")
    assert "weights and gradients are bf16" in f.message


def test_incident5_kernel_wrapper_assert_names_the_bf16_table_origin(incident, line_of):
    path = incident("incident5_rotary_dtype.py")
    result = run(path, policy="bf16-true", max_steps=None)
    assert result.exit_code == 1 and isinstance(result.exception, AssertionError)
    rope = [f for f in by_name(result.report, "rope-dtype-mismatch") if f.origin is not None]
    assert len(rope) == 1
    f = rope[0]
    assert f.severity is Severity.ERROR
    assert (f.location.module, f.location.op) == ("blocks.0.attn", "apply_rotary_emb()")
    assert f.location.line == line_of(path, "assert x.dtype == cos.dtype")
    assert "x=fp32, cos=bf16, sin=bf16" in f.message
    assert (f.origin.module, f.origin.op) == ("rotary_pos_emb", "aten::mul")
    assert ("blocks.0.attn", "aten::_to_copy") in [(r.module, r.op) for r in f.related]  # the tensor.float()
    assert ("blocks.0.attn", "aten::cos") in [(r.module, r.op) for r in f.related]
    # explain ranks rope-dtype-mismatch first for the assert text too; the chain's finding stands for it.
    assert by_name(result.report, "rope-dtype-mismatch") == [f]
    # the bf16 table was computed from the bf16 inv_freq: its buffer finding is on the chain, folded into the crash,
    # which is the run's one warning-or-error finding
    assert by_name(result.report, "rope-cache-low-precision") == []
    assert [x.split(" at ")[0] for x in f.details["folded"]] == ["AMP002 rope-cache-low-precision"]
    assert [x for x in result.report.findings if x.severity is not Severity.INFO] == [f]
    assert result.report.errors == ()


def test_correct_bf16_mixed_script_gets_no_findings(incident, line_of):
    result = run(incident("correct_bf16_mixed.py"), policy="bf16-mixed", max_steps=None)
    assert result.exit_code == 0
    assert result.report.findings == ()
    assert result.report.errors == ()
    table = {row[0]: row for row in result.report.tables[0].rows}
    # ops by dtype, autocast casts vs user casts: the qkv projection runs in bf16 via autocast.
    assert "bf16" in table["blocks.0.attn.qkv"][6]
    assert int(table["blocks.0.attn.qkv"][7]) >= 1
    assert int(table["blocks.0.attn"][8]) >= 2  # cos.to(q.dtype), sin.to(q.dtype)


def test_correct_script_judged_by_cuda_autocast_flags_only_sensitive_ops(incident, line_of):
    result = run(incident("correct_bf16_mixed.py"), policy="bf16-mixed", max_steps=None, target_device="cuda")
    names = {f.name for f in result.report.findings}
    assert names <= {"low-precision-sensitive-op"}
    assert torch.bfloat16 is not None


def test_incident1_failing_op_reports_each_rule_once(incident, line_of):
    # explain on the exception text also ranks implicit-dtype-promotion; the chain's finding (with
    # origin and related) is the one that stays, and nothing else is reported at the failing op.
    path = incident("incident1_neox_rotary.py")
    result = run(path, policy="bf16-true", max_steps=None)
    line = line_of(path, "context = torch.bmm(probs, v)")
    at_failure = [f for f in result.report.findings if (f.location.line, f.location.op) == (line, "aten::bmm")]
    assert [f.name for f in at_failure] == ["implicit-dtype-promotion"]
    assert at_failure[0].severity is Severity.ERROR and at_failure[0].origin is not None


def test_a_failing_run_opens_with_its_root_cause_in_text_and_html(incident, line_of):
    import re

    from ampdoctor.report import render_html, render_text

    path = incident("incident1_neox_rotary.py")
    report = run(path, policy="bf16-true", max_steps=None).report
    bmm, mul, cos = (line_of(path, t) for t in ("context = torch.bmm(probs, v)", "q = q * cos + rotate_half(q) * sin",
                                                "self.cos_cached = emb.cos()"))
    path = report.findings[0].location.file  # as the report names it (relative to where it ran)
    text = render_text(report, width=1000).splitlines()
    start = text.index("root cause: error AMP201 implicit-dtype-promotion")
    assert text[start + 1].strip().startswith("aten::bmm failed on fp32, bf16 inputs")
    chain = [line.strip() for line in text[start + 2:start + 5]]
    assert chain[0].startswith(f"1. failed at: {path}:{bmm}, module blocks.0.attn, op aten::bmm")
    assert chain[1].startswith(f"2. origin: {path}:{mul}, module blocks.0.attn, op aten::mul")
    assert chain[2].startswith(f"3. from: {path}:{cos}, module blocks.0.attn.pos_enc, op aten::cos")
    assert text[start + 5].strip().startswith("on the same chain (folded into it): AMP002 rope-cache-low-precision at module "
                                              "blocks.0.attn.pos_enc (inv_freq); ")
    assert "; AMP005 rope-dtype-mismatch at " in text[start + 5]
    assert text[start + 6].strip().startswith("fix: Cast the stray operand")
    # the root cause is not listed twice, and nothing else is left to list: its chain holds every other finding
    assert "other findings" not in text and sum("error AMP201" in line for line in text) == 1
    page = render_html(report)
    cause, rest = page.index('<section class="root-cause">'), page.index("<h2>Other findings (0)")
    assert cause < page.index('<dl class="info">') < rest
    steps = re.findall(r'<li><span class="step">([^<]+)</span> ([^<]+)</li>', page[cause:rest])
    assert [(s, w.split(",")[0]) for s, w in steps] == [("failed at", f"{path}:{bmm}"), ("origin", f"{path}:{mul}"), ("from", f"{path}:{cos}")]
