"""Runtime reproduction of openrlhf-actor-logprobs-bf16: OpenRLHF's own `Actor` (models/actor.py) and `PolicyLoss`
(models/loss.py), imported unmodified from the extracted tree (argv[1]), around a tiny bf16 Llama from transformers
(random weights; the Actor loads its model with torch_dtype=bfloat16); one PPO policy step (old log-probs from a
no-grad pass, fp32 advantages as the experience maker computes them) under ``ampdoctor.audit(policy="bf16-true")``.
Prints the findings as JSON.

openrlhf/__init__.py and models/__init__.py import the trainers (deepspeed, ray...): the package is entered without
them. actor.py imports `peft` (LoRA, used only when it loads a model by name with lora_rank > 0): it is stood in for
by empty names."""

import importlib
import json
import sys
import types
from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM

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
cfg = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                  num_key_value_heads=2, max_position_embeddings=64)
actor = Actor(LlamaForCausalLM._from_config(cfg, dtype=torch.bfloat16))  # as from_pretrained(torch_dtype=bf16) builds it
actor.packing_samples = False  # the constructor's default, which it sets only when it loads the model by name
opt = torch.optim.AdamW(actor.parameters(), lr=1e-3)
seqs = torch.randint(0, 128, (2, 24))
attention_mask = torch.ones_like(seqs)
num_actions = 8
with torch.no_grad():
    old_log_probs = actor(seqs, num_actions, attention_mask)
advantages = torch.randn(2, num_actions)
action_mask = torch.ones(2, num_actions, dtype=torch.bool)
with ampdoctor.audit(policy="bf16-true", model=actor) as audit:
    log_probs = actor(seqs, num_actions, attention_mask)
    loss = PolicyLoss()(log_probs, old_log_probs, advantages, action_mask=action_mask)
    loss.backward()
    opt.step()
print(json.dumps([[f.rule_id, getattr(f.severity, "value", str(f.severity))] for f in audit.report.findings]))
if "-v" in sys.argv:
    print("\n".join(f"{f.rule_id} {f.severity} {f.location} | {f.message}" for f in audit.report.findings))
