"""The audit sees every call of scaled_dot_product_attention however the caller reached it: through a name bound before
the audit started (model code's `from torch.nn.functional import scaled_dot_product_attention`, or a library's patch
of the attribute that keeps the original), and on the math path, where no op it runs shows the caller's dtypes.

A wrapper put on the attribute for the audit misses both (measured: the archsweep's AMP122 injection, a patch that
calls the original, fell from 33 of 33 to 24 of 33 architectures), so the calls are watched at the function level."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.functional import scaled_dot_product_attention as bound_early

from ampdoctor.audit.session import audit_step


class Attention(nn.Module):
    """bf16 queries with an fp32 additive mask, with attention dropout: CPU's SDPA takes its math path."""

    def __init__(self, attend) -> None:
        super().__init__()
        self.attend = attend
        self.qkv = nn.Linear(16, 48, dtype=torch.bfloat16)

    def forward(self, h, mask):
        b, s, d = h.shape
        q, k, v = self.qkv(h).view(b, s, 3, 2, d // 2).permute(2, 0, 3, 1, 4)
        return self.attend(q, k, v, attn_mask=mask, dropout_p=0.1).float().sum()


def _batch():
    padding = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])
    mask = (1.0 - padding[:, None, None, :].float()) * torch.finfo(torch.float32).min
    return {"h": torch.randn(2, 4, 16, dtype=torch.bfloat16), "mask": mask}


def _amp122(attend) -> list:
    a = audit_step(Attention(attend), _batch(), loss_fn=lambda out, batch: out, policy="bf16-true", reraise=False)
    assert a.exception is None
    return [f for f in a.report.findings if f.rule_id == "AMP122"]


def test_a_call_through_a_name_bound_before_the_audit_is_seen():
    assert _amp122(lambda *a, **k: F.scaled_dot_product_attention(*a, **k))  # the attribute, looked up at the call
    assert _amp122(bound_early)


def test_a_call_a_patch_of_the_attribute_makes_to_the_original_is_seen():
    real = F.scaled_dot_product_attention

    def patched(q, k, v, attn_mask=None, **kw):  # as attention libraries patch it: their own work, then torch's
        return real(q, k, v, attn_mask=attn_mask, **kw)

    F.scaled_dot_product_attention = patched
    try:
        assert _amp122(lambda *a, **k: F.scaled_dot_product_attention(*a, **k))
    finally:
        F.scaled_dot_product_attention = real
