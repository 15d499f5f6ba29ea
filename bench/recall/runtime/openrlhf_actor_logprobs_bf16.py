"""Runtime reproduction of openrlhf-actor-logprobs-bf16: OpenRLHF's own `Actor` (models/actor.py) and `PolicyLoss`
(models/loss.py), imported unmodified from the extracted tree (argv[1]), around a tiny bf16 Llama from transformers
(random weights; the Actor loads its model with torch_dtype=bfloat16); one PPO policy step (old log-probs from a
no-grad pass, fp32 advantages as the experience maker computes them) under ``ampdoctor.audit(policy="bf16-true")``.
Prints the findings as JSON.

openrlhf/__init__.py and models/__init__.py import the trainers (deepspeed, ray...): the package is entered without
them. actor.py imports `peft` (LoRA, used only when it loads a model by name with lora_rank > 0): it is stood in for
by empty names."""

import importlib
import sys
import types
from pathlib import Path

import torch
from _common import audited_step, tiny_llama

import ampdoctor

root = Path(sys.argv[1])
for name in ("openrlhf", "openrlhf.models"):
    pkg = types.ModuleType(name)
    pkg.__path__ = [str(root / name.replace(".", "/"))]
    sys.modules[name] = pkg
peft = types.ModuleType("peft")
peft.LoraConfig = peft.TaskType = peft.get_peft_model = None
lora = types.ModuleType("peft.tuners.lora")
lora.LoraLayer = type("LoraLayer", (), {})
sys.modules.update({"peft": peft, "peft.tuners": types.ModuleType("peft.tuners"), "peft.tuners.lora": lora})

Actor = importlib.import_module("openrlhf.models.actor").Actor
PolicyLoss = importlib.import_module("openrlhf.models.loss").PolicyLoss

torch.manual_seed(0)
actor = Actor(tiny_llama(torch.bfloat16))
actor.packing_samples = False  # the constructor's default, which it sets only when it loads the model by name
opt = torch.optim.AdamW(actor.parameters(), lr=1e-3)
seqs = torch.randint(0, 128, (2, 24))
attention_mask = torch.ones_like(seqs)
num_actions = 8
with torch.no_grad():
    old_log_probs = actor(seqs, num_actions, attention_mask)
advantages = torch.randn(2, num_actions)
action_mask = torch.ones(2, num_actions, dtype=torch.bool)


def step():
    log_probs = actor(seqs, num_actions, attention_mask)
    PolicyLoss()(log_probs, old_log_probs, advantages, action_mask=action_mask).backward()
    opt.step()


audited_step(ampdoctor.audit(policy="bf16-true", model=actor), step)
