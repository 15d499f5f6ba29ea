"""PrecisionStep on CPU: autocast to the policy's compute dtype, fp32 loss, no scaler for bf16, exact accumulation."""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ampdoctor.policy import Policy
from ampdoctor.train import PrecisionStep


def mlp(dtype=torch.float32):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)).to(dtype)


def micro_batches(count, size=4):
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(size, 8, generator=g), torch.randint(0, 4, (size,), generator=g)) for _ in range(count)]


class RecordingSGD(torch.optim.SGD):
    """SGD that keeps the gradients it was stepped with."""

    def step(self, closure=None):
        self.seen = [p.grad.clone() for group in self.param_groups for p in group["params"]]
        return super().step(closure)


def test_bf16_mixed_runs_compute_in_bf16_loss_in_fp32_and_no_scaler():
    model = mlp()
    seen = {}
    model[0].register_forward_hook(lambda m, i, o: seen.update(hidden=o.dtype))

    def loss_fn(logits, target):
        seen["logits"] = logits.dtype
        return F.cross_entropy(logits, target)

    step = PrecisionStep(model, torch.optim.SGD(model.parameters(), lr=0.1), "bf16-mixed", loss_fn, device_type="cpu")
    result = step(micro_batches(2))
    assert step.scaler is None
    assert seen == {"hidden": torch.bfloat16, "logits": torch.float32}
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    assert result.micro_batches == 2 and not result.skipped and result.loss > 0


def test_accumulating_micro_batches_equals_one_full_batch_update():
    model = mlp()
    reference = copy.deepcopy(model)
    optimizer = RecordingSGD(model.parameters(), lr=1.0)
    batches = micro_batches(4)
    result = PrecisionStep(model, optimizer, "fp32", F.cross_entropy)(batches)
    x, y = torch.cat([b[0] for b in batches]), torch.cat([b[1] for b in batches])
    full_loss = F.cross_entropy(reference(x), y)
    full_loss.backward()
    for grad, p in zip(optimizer.seen, reference.parameters()):
        assert torch.allclose(grad, p.grad, atol=1e-6)
    assert result.loss == pytest.approx(full_loss.item(), rel=1e-6)


def test_bf16_params_accumulate_in_fp32_and_round_once():
    batches = micro_batches(16, size=1)
    model = mlp(torch.bfloat16)
    optimizer = RecordingSGD(model.parameters(), lr=0.0)
    with pytest.warns(RuntimeWarning, match="\\[pure-bf16-optimizer\\] params=bf16"):
        step = PrecisionStep(model, optimizer, "params=bf16, grad_accum=fp32", F.cross_entropy)
    step(batches)
    # Expected: each micro-batch gradient (bf16, as autograd makes it), summed in fp32, rounded to bf16 once.
    probe = mlp(torch.bfloat16)
    per_batch = []
    for x, y in batches:
        probe.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = probe(x)
        (F.cross_entropy(out.float(), y) / len(batches)).backward()
        per_batch.append([p.grad.clone() for p in probe.parameters()])
    fp32_sum = [sum(g[i].float() for g in per_batch).to(torch.bfloat16) for i in range(len(per_batch[0]))]
    bf16_sum = [sum(g[i] for g in per_batch) for i in range(len(per_batch[0]))]
    assert all(torch.equal(a, b) for a, b in zip(optimizer.seen, fp32_sum))
    assert not all(torch.equal(a, b) for a, b in zip(optimizer.seen, bf16_sum))  # bf16 accumulation differs
    assert all(g.dtype == torch.bfloat16 for g in optimizer.seen)


def test_fp16_mixed_uses_a_scaler_and_skips_a_step_with_inf_gradients():
    model = mlp()
    before = [p.detach().clone() for p in model.parameters()]
    step = PrecisionStep(model, torch.optim.SGD(model.parameters(), lr=0.1), "fp16-mixed",
                         lambda logits, target: F.cross_entropy(logits, target) * target.float().sum().div(0), device_type="cpu")
    assert step.scaler is not None
    result = step(micro_batches(1))
    assert result.skipped
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_grad_norm_is_reported_before_clipping():
    model = mlp()
    result = PrecisionStep(model, torch.optim.SGD(model.parameters(), lr=0.1), "bf16-mixed", F.cross_entropy,
                           max_grad_norm=1e-3)(micro_batches(1))
    assert result.grad_norm is not None and result.grad_norm > 1e-3


def test_bf16_policy_with_loss_scaling_warns_and_builds_no_scaler():
    # fp32 weights give fp32 gradients, which GradScaler unscales fine: scaling is pointless, not fatal, and the
    # step never builds a scaler for bf16 compute anyway.
    model = mlp()
    with pytest.warns(RuntimeWarning, match="\\[grad-scaler-with-bf16\\] a GradScaler is on .* compute is bf16"):
        step = PrecisionStep(model, torch.optim.SGD(model.parameters(), lr=0.1), "compute=bf16, loss_scale=dynamic", F.cross_entropy)
    assert step.scaler is None


def test_bf16_weights_with_loss_scaling_are_refused():
    # bf16 gradients crash GradScaler's unscale kernel on CUDA (incident 4): the same rule, as an error.
    model = mlp(torch.bfloat16)
    with pytest.raises(ValueError, match="\\[grad-scaler-with-bf16\\] .*weights and gradients are bf16"):
        PrecisionStep(model, torch.optim.SGD(model.parameters(), lr=0.1), "params=bf16, loss_scale=dynamic", F.cross_entropy)


def test_model_in_the_wrong_dtype_is_refused():
    model = mlp(torch.bfloat16)
    with pytest.raises(ValueError, match="parameter '0.weight' is bf16 \\(4 trainable parameter\\(s\\) in all\\), but the policy says params=fp32"):
        PrecisionStep(model, torch.optim.SGD(model.parameters(), lr=0.1), Policy.preset("bf16-mixed"), F.cross_entropy)


def test_optimizer_parameters_outside_the_model_are_refused():
    model, other = mlp(), mlp()
    with pytest.raises(ValueError, match="4 optimizer parameter\\(s\\) do not belong to the model"):
        PrecisionStep(model, torch.optim.SGD(other.parameters(), lr=0.1), "bf16-mixed", F.cross_entropy)


def test_low_precision_loss_and_bad_micro_batches_are_refused():
    model = mlp()
    step = PrecisionStep(model, torch.optim.SGD(model.parameters(), lr=0.1), "bf16-mixed",
                         lambda logits, target: F.cross_entropy(logits, target).bfloat16())
    with pytest.raises(TypeError, match="loss_fn returned a bf16 loss"):
        step(micro_batches(1))
    with pytest.raises(ValueError, match="at least one"):
        step([])
    with pytest.raises(ValueError, match="\\(inputs, target\\) pair"):
        step([torch.randn(2, 8)])


class WithRotary(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = mlp()
        self.rotary = nn.Module()
        self.rotary.dim, self.rotary.base = 8, 10000.0
        inv_freq = 1.0 / 10000.0 ** (torch.arange(0, 8, 2) / 8)
        self.rotary.register_buffer("inv_freq", inv_freq.to(torch.bfloat16), persistent=False)

    def forward(self, x):
        return self.body(x)


def test_rotary_tables_in_the_model_are_fixed_at_construction():
    model = WithRotary()
    rotary = model.rotary
    step = PrecisionStep(model, torch.optim.SGD(model.parameters(), lr=0.1), "bf16-mixed", F.cross_entropy)
    assert [(f.module, f.dtypes_before) for f in step.rope_fixes] == [("rotary", (torch.bfloat16,))]
    assert rotary.inv_freq.dtype == torch.float32
