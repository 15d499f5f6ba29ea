"""Claims of catalog entries that a fixture folder cannot hold (they depend on the machine, not on a file), each
with its bad and good case: every claim a rule's text makes is a detection some test asks for."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from ampdoctor import audit, hardware
from ampdoctor.facts import Device, RunFacts
from ampdoctor.policy import Policy
from ampdoctor.core.engine import check_policy


def ids(findings) -> list[str]:
    return [f.rule_id for f in findings]


@pytest.mark.parametrize("flags, expected", [((), ["AMP113"]), (("avx512_bf16",), [])])
def test_amp113_cpu_without_bf16_instructions(monkeypatch, flags, expected):
    """AMP113: "bf16 is requested on hardware without native bf16 (... CPU without bf16 instructions ...)"."""
    monkeypatch.setattr(hardware, "cpu_bf16_flags", lambda: flags)
    found = Policy.preset("bf16-mixed").validate(device="cpu")
    assert ids(found) == expected
    if expected:
        assert "cpu" in found[0].message and "no native bf16" in found[0].message


@pytest.mark.parametrize("nccl, world, expected", [((2, 8, 3), 8, ["AMP113"]), ((2, 10, 3), 8, []), ((2, 8, 3), 1, [])])
def test_amp113_nccl_older_than_2_10(nccl, world, expected):
    """AMP113: "... NCCL < 2.10": it cannot reduce bf16 tensors, which matters only with more than one rank."""
    a100 = Device("cuda:0 (A100)", True, capability="8.0")
    found = check_policy(Policy.preset("bf16-mixed"), RunFacts(devices=(a100,), nccl_version=nccl, world_size=world))
    assert ids(found) == expected
    if expected:
        assert found[0].message == "NCCL 2.8.3 < 2.10 cannot reduce bf16 tensors"


class Sensitive(torch.nn.Module):
    """One op of each kind AMP204's summary names."""

    def forward(self, x):
        return (torch.softmax(x, -1), F.layer_norm(x, (x.shape[-1],)), x.exp(), x.abs().log(), x.cumsum(-1), x.sum(),
                x.clamp(-0.5, 0.5).asin())


# AMP204's summary, "softmax, norm, exp/log, cumsum, sum, trig", as the ops they dispatch to.
SENSITIVE = {"aten::_softmax", "aten::native_layer_norm", "aten::exp", "aten::log", "aten::cumsum", "aten::sum", "aten::asin"}


@pytest.mark.parametrize("half", [True, False])
def test_amp204_each_kind_of_sensitive_op(half):
    """AMP204: each kind of op its summary names is reported in half precision (judged for CUDA autocast), none in fp32."""
    model = Sensitive()
    x = torch.randn(4, 16, generator=torch.Generator().manual_seed(0))
    with audit("bf16-mixed", target_device="cuda") as a:
        model(x.bfloat16() if half else x)
    ops = {f.location.op for f in a.report.findings if f.rule_id == "AMP204"}
    assert ops == (SENSITIVE if half else set())
