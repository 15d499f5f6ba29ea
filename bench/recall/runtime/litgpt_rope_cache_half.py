"""Runtime reproduction of litgpt-rope-cache-half: Lit-GPT's own model.py/config.py/rmsnorm.py, imported unmodified
from the extracted tree (argv[1]), one pure-bf16 training step (the default dtype bf16 while the model is built, as
Fabric's bf16-true init does) under ``ampdoctor.audit(policy="bf16-true")``. Prints the findings as JSON.

lit_gpt/__init__.py and lit_gpt/utils.py need `lightning`; the package is entered without its __init__ and utils is
replaced by the one helper config.py takes from it (find_multiple)."""

import importlib
import json
import sys
import types
from pathlib import Path

import torch

import ampdoctor

root = Path(sys.argv[1])
pkg = types.ModuleType("lit_gpt")
pkg.__path__ = [str(root / "lit_gpt")]
sys.modules["lit_gpt"] = pkg
utils = types.ModuleType("lit_gpt.utils")
utils.find_multiple = lambda n, k: n if n % k == 0 else n + k - (n % k)
sys.modules["lit_gpt.utils"] = utils

GPT = importlib.import_module("lit_gpt.model").GPT  # the package's own import order (config imports model)
Config = importlib.import_module("lit_gpt.config").Config

torch.manual_seed(0)
cfg = Config(block_size=64, vocab_size=128, padded_vocab_size=128, n_layer=1, n_head=2, n_embd=32, rotary_percentage=1.0,
             _norm_class="RMSNorm", _mlp_class="LLaMAMLP", intermediate_size=64, bias=False)
torch.set_default_dtype(torch.bfloat16)
model = GPT(cfg)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
idx = torch.randint(0, 128, (2, 64))
with ampdoctor.audit(policy="bf16-true") as audit:
    logits = model(idx)
    loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, 128), idx.reshape(-1))
    loss.backward()
    opt.step()
print(json.dumps([[f.rule_id, getattr(f.severity, "value", str(f.severity))] for f in audit.report.findings]))
