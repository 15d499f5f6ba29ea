"""The audit leaves no trace: bitwise-identical results, and all global state restored."""

import importlib.util
import os

import pytest
import torch
import torch.nn.modules.module as module_mod
from torch.optim import optimizer as optim_mod
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

from ampdoctor.audit import audit, audit_step

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "incidents", "correct_bf16_mixed.py")


def load_example():
    spec = importlib.util.spec_from_file_location("correct_bf16_mixed", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def global_state():
    return (
        len(_get_current_dispatch_mode_stack()),
        len(module_mod._global_forward_pre_hooks),
        len(module_mod._global_forward_hooks),
        len(optim_mod._global_optimizer_pre_hooks),
        len(optim_mod._global_optimizer_post_hooks),
        torch.amp.autocast_mode.autocast.__enter__,
        torch.amp.autocast_mode.autocast.__exit__,
        torch.is_grad_enabled(),
        torch.is_autocast_enabled("cpu"),
    )


def step(ex, audited: bool):
    torch.manual_seed(0)
    model = ex.TinyGPT()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(0, 128, (2, 16))
    grads = None

    def run():
        nonlocal grads
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(ids)
        loss = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), ids.flatten())
        loss.backward()
        grads = [p.grad.clone() for p in model.parameters()]
        optimizer.step()
        return logits, loss

    if audited:
        with audit("bf16-mixed") as a:
            logits, loss = run()
        assert a.report.findings == ()
    else:
        logits, loss = run()
    return logits, loss, grads, [p.detach().clone() for p in model.parameters()]


def test_audited_step_is_bitwise_identical_to_the_plain_step():
    ex = load_example()
    plain = step(ex, audited=False)
    audited = step(ex, audited=True)
    assert torch.equal(plain[0], audited[0]) and plain[0].dtype == audited[0].dtype == torch.bfloat16
    assert torch.equal(plain[1], audited[1])
    assert all(torch.equal(a, b) for a, b in zip(plain[2], audited[2]))
    assert all(torch.equal(a, b) for a, b in zip(plain[3], audited[3]))


def test_global_state_is_restored_after_the_step():
    before = global_state()
    model = torch.nn.Linear(4, 4)
    with audit("bf16-mixed") as a:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            model(torch.randn(2, 4)).float().sum().backward()
    assert global_state() == before
    assert a.report.errors == ()


def test_global_state_is_restored_when_the_step_raises():
    before = global_state()
    model = torch.nn.Linear(4, 4).to(torch.bfloat16)
    with pytest.raises(RuntimeError):
        with audit("bf16-mixed") as a:
            with torch.no_grad():
                torch.mm(model(torch.randn(2, 4, dtype=torch.bfloat16)), torch.randn(4, 4))
    assert global_state() == before
    assert a.report.errors == ()
    # the failing op is named with its dtypes even when no promotion caused it
    [f] = [f for f in a.report.findings if f.name == "implicit-dtype-promotion" and f.location.op == "aten::mm" and "failed on" in f.message]
    assert f.severity.value == "error" and "aten::mm failed on bf16, fp32 inputs" in f.message


def test_audit_step_runs_a_train_step_and_keeps_results():
    ex = load_example()
    torch.manual_seed(0)
    model = ex.TinyGPT()
    ids = torch.randint(0, 128, (2, 16))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    before = [p.detach().clone() for p in model.parameters()]
    a = audit_step(model, (ids,), loss_fn=lambda out, batch: torch.nn.functional.cross_entropy(out.float().flatten(0, 1), batch[0].flatten()), optimizer=opt)
    assert a.report.findings == ()
    assert a.output.dtype == torch.bfloat16  # autocast applied by the policy
    assert any(not torch.equal(b, p) for b, p in zip(before, model.parameters()))


def test_sparse_and_nested_tensors_cast_to_half_pass_through_the_audit():
    # a graph's adjacency (COO, CSR) or a batch of ragged sequences (nested) made half: the value watches read plain
    # strided tensors only (reductions and boolean indexing have no sparse or nested kernels), and the script gets
    # its tensors as without the audit
    coo = torch.sparse_coo_tensor(torch.tensor([[0, 1, 2], [1, 0, 2]]), torch.tensor([3.0, -1e9, 500.0]), (3, 3))
    csr = torch.tensor([[0.0, 700.0], [-1e9, 0.0]]).to_sparse_csr()
    nested = torch.nested.nested_tensor([torch.tensor([1.0, -1e9]), torch.tensor([300.0, 3.0, -1e9])])

    def casts():
        return [coo.to(torch.bfloat16).to_dense(), csr.to(torch.float16).to_dense(), coo.long().to(torch.bfloat16).to_dense(),
                coo.to(torch.bfloat16).sin().to_dense(), nested.to(torch.bfloat16).to_padded_tensor(0.0)]

    plain = casts()
    with audit("bf16-true"):
        audited = casts()
    for a, b in zip(audited, plain):
        assert torch.equal(a, b)
