"""The attention calls the audit sees (`audit/calls.py`): through its wrapper of `F.scaled_dot_product_attention`, put
in place while it records and taken out exactly, and, for a name bound before the audit, through the fused kernel the
call reaches."""

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.functional import scaled_dot_product_attention as early_sdpa  # bound before any audit

from ampdoctor.audit import audit
from ampdoctor.audit.provenance import Trace

NAME = "scaled_dot_product_attention"
SDPA = torch._C._nn.scaled_dot_product_attention


def _q() -> torch.Tensor:
    return torch.randn(1, 2, 8, 4, dtype=torch.bfloat16, requires_grad=True)


def test_a_call_through_a_name_bound_before_the_audit_is_seen_at_its_fused_kernel():
    q = _q()
    with audit("bf16-mixed") as a:
        out = early_sdpa(q, q, q, attn_mask=torch.zeros(8, 8))  # no dropout: CPU's flash kernel, one op
        with torch.autocast("cpu", dtype=torch.bfloat16):
            early_sdpa(q.float(), q.float(), q.float())
        out.float().sum().backward()
    trace = Trace(a.recorder)
    first, second = trace.attention_calls
    assert (first.query, first.key, first.value, first.mask, first.autocast) == (torch.bfloat16,) * 3 + (torch.float32, None)
    assert first.end == first.start + 1 and trace.op(first.start) == "aten::_scaled_dot_product_flash_attention_for_cpu"
    # under autocast: the dtypes the kernel got, after autocast's casts
    assert (second.query, second.mask, second.autocast, second.compute) == (torch.bfloat16, None, torch.bfloat16, torch.bfloat16)
    assert trace.attention_call_of(second.start) is second and trace.attention_call_of(second.start - 1) is None
    assert "AMP122" in {f.rule_id for f in a.report.findings}


def test_a_call_the_wrapper_sees_is_noted_once_with_the_dtypes_its_caller_gave():
    q = _q()
    with audit("bf16-mixed") as a:
        F.scaled_dot_product_attention(q, q, q, attn_mask=torch.ones(8, 8, dtype=torch.bool))
    (call,) = a.recorder.attention_calls
    # the caller's boolean mask (the kernel gets it converted to an additive bf16 one, by ops inside the call)
    assert call.mask == torch.bool and call.end - call.start > 1


def test_the_math_path_of_an_early_bound_name_is_not_seen():
    # the limit of the wrapper, written down: with dropout CPU takes the math path, decomposed before the dispatch
    # mode sees a kernel of its own
    q = _q()
    with audit("bf16-mixed") as a:
        early_sdpa(q, q, q, dropout_p=0.5)
    assert a.recorder.attention_calls == []


def test_the_wrapper_is_taken_out_exactly_and_a_patch_made_over_it_stays():
    assert vars(F)[NAME] is SDPA
    q = _q()
    with audit("bf16-mixed"):
        assert vars(F)[NAME] is not SDPA and vars(F)[NAME].__wrapped__ is SDPA
    assert vars(F)[NAME] is SDPA

    def patch(*args, **kwargs):
        return saved(*args, **kwargs)

    try:
        with audit("bf16-mixed") as a:
            saved = F.scaled_dot_product_attention  # the audit's wrapper
            F.scaled_dot_product_attention = patch
            F.scaled_dot_product_attention(q, q, q)  # through the patch into the wrapper: seen
        assert vars(F)[NAME] is patch  # the patch stays; the wrapper under it only calls through
        F.scaled_dot_product_attention(q, q, q)
        assert len(a.recorder.attention_calls) == 1
        with audit("bf16-mixed") as b:  # an audit over a patch that is not torch's function: fused kernels only
            F.scaled_dot_product_attention(q, q, q)
        assert vars(F)[NAME] is patch and [c.end - c.start for c in b.recorder.attention_calls] == [1]
        F.scaled_dot_product_attention = saved  # code restores the wrapper it saved, after that audit ended
        with audit("bf16-mixed") as c:  # a later audit wraps the stale wrapper, which only calls through
            F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
            assert vars(F)[NAME].__wrapped__ is saved
        assert vars(F)[NAME] is saved and len(c.recorder.attention_calls) == 1 and len(a.recorder.attention_calls) == 1
    finally:
        F.scaled_dot_product_attention = SDPA


def test_the_wrapper_goes_when_the_step_raises_and_when_recording_stops_early():
    q = _q()
    try:
        with audit("bf16-mixed"):
            raise ValueError("the step failed")
    except ValueError:
        pass
    assert vars(F)[NAME] is SDPA
    model = nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with audit("bf16-mixed", max_steps=1) as a:
        model(torch.randn(2, 4)).sum().backward()
        opt.step()  # the one step recorded: recording stops here, and the wrapper goes
        assert vars(F)[NAME] is SDPA
        F.scaled_dot_product_attention(q, q, q)
    assert a.recorder.attention_calls == []
