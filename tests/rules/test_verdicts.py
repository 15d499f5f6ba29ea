"""One verdict per rule for the same policy and facts, wherever it is asked: `Policy.validate()`, config lint and
the runtime audit all ask the same policy-level predicates. Each test reads each path's verdict from what that path
really reports (the findings of config lint on the files, the findings in the audit's report of the script, what
`Policy.validate()` returns) and compares it with the verdict the input is known to deserve (the fixture's side
and expected.yaml, the table below): a silenced or broken predicate fails here, not only a disagreement."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

from ampdoctor.facts import RunFacts
from ampdoctor.lint.configs import lint_config_files, lint_readings, read_configs
from ampdoctor.lint.engine import is_config_candidate, own_code_by_config
from ampdoctor.policy import Policy
from ampdoctor.core.engine import check_policy, rules_fired

HERE = Path(__file__).parent


def fires(rule_id: str, findings) -> bool:
    return rule_id in rules_fired(findings)


def validated(policy: Policy | None, facts: RunFacts) -> list:
    """`Policy.validate()`; a reading with no policy at all (only facts) has nothing to call it on, and asks the
    predicates directly as `Policy.validate()` would."""
    return policy.validate(facts=facts) if policy is not None else check_policy(None, facts)


# --- config lint and Policy.validate, on every policy fixture ------------------------------------------------

def policy_fixture_cases():
    out = []
    for folder in sorted(HERE.glob("AMP*-*/policy/*/*")):
        if folder.is_dir():
            out.append(pytest.param(folder.parts[-4].split("-")[0], folder, id=folder.relative_to(HERE).as_posix()))
    return out


@pytest.mark.parametrize("rule_id, case", policy_fixture_cases())
def test_config_lint_and_validate_give_each_fixture_its_verdict(rule_id, case):
    files = sorted(p for p in case.rglob("*") if p.is_file() and p.name != "expected.yaml" and is_config_candidate(p))
    expected = case.parent.name == "bad"
    if expected:
        assert yaml.safe_load((case / "expected.yaml").read_text()), "a bad case expects at least one finding"
    # a case that holds Python is a project: its configs are read with the keys its own argument classes declare and
    # the load dtype its own loading code defaults to
    python = sorted(case.rglob("*.py"))
    own, defaults = own_code_by_config(files, python, [case])
    by_lint = fires(rule_id, lint_readings(*read_configs(files, own, defaults)).findings)
    readings, _, _ = read_configs(files, own, defaults)
    assert readings
    by_validate = any(fires(rule_id, validated(r.policy, r.facts)) for r in readings)
    assert (by_lint, by_validate) == (expected, expected)


# --- the audit vs Policy.validate, on scripts whose observed policy is written out --------------------------

STEP = """
import torch
torch.manual_seed(0)
x = torch.randn(4, 8)
"""

SCRIPTS = {
    # rule: (fires, the policy the audit must observe, script)
    "AMP004": [
        (True, "params=bf16,compute=bf16,grads=bf16,grad_accum=bf16,reduce=bf16,loss_scale=dynamic", """
            model = torch.nn.Linear(8, 8).to(torch.bfloat16)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            scaler = torch.amp.GradScaler("cpu")
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = model(x.bfloat16()).float().pow(2).mean()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        """),
        (False, "params=fp32,compute=bf16", """
            model = torch.nn.Linear(8, 8)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = model(x).float().pow(2).mean()
            loss.backward()
            opt.step()
        """),
    ],
    "AMP202": [
        (True, "params=fp32,compute=fp16,loss_scale=none", """
            model = torch.nn.Linear(8, 8)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            with torch.autocast("cpu", dtype=torch.float16):
                loss = model(x).float().pow(2).mean()
            loss.backward()
            opt.step()
        """),
        (False, "params=fp32,compute=fp16,loss_scale=dynamic", """
            model = torch.nn.Linear(8, 8)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            scaler = torch.amp.GradScaler("cpu")
            with torch.autocast("cpu", dtype=torch.float16):
                loss = model(x).float().pow(2).mean()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        """),
    ],
    "AMP121": [
        (True, "params=fp16,compute=bf16,grads=fp16,grad_accum=fp16,reduce=fp16", """
            model = torch.nn.Linear(8, 8).half()
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = model(x.half()).float().pow(2).mean()
            loss.backward()
            opt.step()
        """),
    ],
    "AMP003": [
        (True, "params=bf16,grads=fp32,grad_accum=fp32,reduce=fp32", """
            model = torch.nn.Linear(8, 8).to(torch.bfloat16)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for micro in range(2):
                model(x.bfloat16()).float().pow(2).mean().backward()
                for p in model.parameters():
                    p.grad.data = p.grad.data.to(torch.float32)
            opt.step()
        """),
    ],
    "AMP117": [
        # DeepSpeed's BF16_Optimizer keeps fp32 masters of the bf16 model: micro-batch grads summed in bf16 (#2768)
        (True, "params=bf16,grad_accum=bf16,reduce=bf16", """
            class BF16_Optimizer(torch.optim.Optimizer):
                def __init__(self, params):
                    params = list(params)
                    super().__init__(params, {"lr": 0.1})
                    self.masters = [p.detach().float() for p in params]

                def step(self):
                    for p, master in zip(self.param_groups[0]["params"], self.masters):
                        master.add_(p.grad.float(), alpha=-0.1)
                        p.data.copy_(master)

            model = torch.nn.Linear(8, 8).to(torch.bfloat16)
            opt = BF16_Optimizer(model.parameters())
            for micro in range(2):
                model(x.bfloat16()).float().pow(2).mean().backward()
            opt.step()
        """),
        # the same accumulation with no master copy anywhere is the pure-bf16 design: still reported, as a note
        (True, "params=bf16,grad_accum=bf16,reduce=bf16", """
            model = torch.nn.Linear(8, 8).to(torch.bfloat16)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for micro in range(2):
                model(x.bfloat16()).float().pow(2).mean().backward()
            opt.step()
        """),
        (False, "params=fp32,compute=bf16", """
            model = torch.nn.Linear(8, 8)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for micro in range(2):
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    loss = model(x).float().pow(2).mean()
                loss.backward()
            opt.step()
        """),
    ],
    "AMP119": [
        (True, "params=bf16,grad_accum=bf16,reduce=bf16,optimizer_state=bf16", """
            model = torch.nn.Linear(8, 8).to(torch.bfloat16)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
            model(x.bfloat16()).float().pow(2).mean().backward()
            opt.step()
        """),
    ],
    "AMP128": [
        (True, "params=bf16,grad_accum=bf16,reduce=bf16", """
            model = torch.nn.Linear(8, 8).to(torch.bfloat16)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = model(x).float().pow(2).mean()
            loss.backward()
            opt.step()
        """),
    ],
    "AMP206": [
        (True, "params=fp32,optimizer_state=bf16", """
            class HalfMomentum(torch.optim.Optimizer):
                def __init__(self, params):
                    super().__init__(params, {"lr": 0.1})

                def step(self):
                    for group in self.param_groups:
                        for p in group["params"]:
                            buf = self.state[p].setdefault("momentum", torch.zeros_like(p, dtype=torch.bfloat16))
                            buf.mul_(0.9).add_(p.grad.bfloat16())
                            p.data.add_(buf.float(), alpha=-group["lr"])

            model = torch.nn.Linear(8, 8)
            opt = HalfMomentum(model.parameters())
            model(x).pow(2).mean().backward()
            opt.step()
        """),
    ],
}


def script_cases():
    return [pytest.param(rule, expected, policy, body, id=f"{rule}-{'fires' if expected else 'quiet'}-{n}")
            for rule, cases in SCRIPTS.items() for n, (expected, policy, body) in enumerate(cases)]


@pytest.mark.parametrize("rule_id, expected, policy, body", script_cases())
def test_the_audit_says_what_validate_says_of_the_observed_run(rule_id, expected, policy, body, tmp_path, monkeypatch):
    from ampdoctor.audit.runner import run

    (tmp_path / "step.py").write_text(STEP + textwrap.dedent(body))
    monkeypatch.chdir(tmp_path)
    result = run("step.py", max_steps=None)
    assert result.exception is None, result.exception
    observed = result.observed
    assert observed.policy == Policy.parse(policy)
    by_audit = fires(rule_id, result.report.findings)
    by_validate = fires(rule_id, observed.policy.validate(facts=observed.facts))
    assert (by_audit, by_validate) == (expected, expected)


# --- one policy and the same facts through all three paths ---------------------------------------------------

# bf16 weights updated by plain AdamW with bf16 state, one micro-batch, no autocast: the updates round away (AMP119);
# without autocast this is not "mixed precision without master weights" (AMP128), nothing is accumulated (AMP117)
# and the state is in the params' own dtype, which AMP119 already says (AMP206 is low-precision state beside fp32).
PURE_BF16_VERDICTS = {"AMP119": True, "AMP128": False, "AMP117": False, "AMP206": False}


def test_a_pure_bf16_recipe_gets_one_verdict_from_config_lint_audit_and_validate(tmp_path, monkeypatch):
    """torchtune's `dtype: bf16` with plain AdamW, and a script that trains a bf16 model with AdamW, are the same
    policy and (for these rules) the same facts: one verdict per rule from all three paths."""
    from ampdoctor.audit.runner import run

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(textwrap.dedent("""
        model:
          _component_: torchtune.models.llama3_2.llama3_2_1b
        optimizer:
          _component_: torch.optim.AdamW
          lr: 2e-5
        dtype: bf16
        gradient_accumulation_steps: 1
    """))
    [reading], _, _ = read_configs([recipe])
    (tmp_path / "step.py").write_text(STEP + textwrap.dedent(SCRIPTS["AMP119"][0][2]))
    monkeypatch.chdir(tmp_path)
    audit = run("step.py", max_steps=None)
    observed = audit.observed
    assert reading.policy == observed.policy == Policy.parse("bf16-true")
    shared = ("grad_accum_steps", "autocast", "adapters_only", "optimizer_kind", "trains")
    facts = RunFacts(**{name: getattr(observed.facts, name) for name in shared})
    assert {name: getattr(reading.facts, name) for name in shared if name != "trains"} == {n: getattr(facts, n) for n in shared if n != "trains"}
    by_config = lint_config_files([recipe]).findings
    by_audit = audit.report.findings
    by_validate = observed.policy.validate(facts=facts)
    for rule_id, expected in PURE_BF16_VERDICTS.items():
        verdicts = {"config": fires(rule_id, by_config), "audit": fires(rule_id, by_audit), "validate": fires(rule_id, by_validate)}
        assert verdicts == dict.fromkeys(verdicts, expected), (rule_id, verdicts)
