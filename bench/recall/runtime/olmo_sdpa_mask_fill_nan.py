"""Runtime reproduction of olmo-sdpa-mask-fill-nan: OLMo's own model.py (with its config/initialization/beam_search
modules), imported unmodified from the extracted tree (argv[1]); a tiny fp32 `Olmo` trained under CPU bf16 autocast,
as OLMo's trainer runs it, on a left-padded batch (the attention mask that the model turns into an additive bias),
one step under ``ampdoctor.audit(policy="bf16-mixed")``. Prints the findings as JSON.

olmo/__init__.py imports the tokenizer (and through it more of OLMo): the package is entered without its __init__.
config.py imports `omegaconf` (for loading YAML configs, not used here): it is stood in for by empty modules."""

import importlib
import sys
import types
from pathlib import Path

import torch
from _common import audited_step

import ampdoctor

root = Path(sys.argv[1])
pkg = types.ModuleType("olmo")
pkg.__path__ = [str(root / "olmo")]
sys.modules["olmo"] = pkg
omegaconf = types.ModuleType("omegaconf")
omegaconf.OmegaConf = None
errors = types.ModuleType("omegaconf.errors")
errors.OmegaConfBaseException = Exception
sys.modules["omegaconf"], sys.modules["omegaconf.errors"] = omegaconf, errors

model_mod = importlib.import_module("olmo.model")
config_mod = importlib.import_module("olmo.config")

torch.manual_seed(0)
cfg = config_mod.ModelConfig(d_model=32, n_heads=2, n_layers=1, mlp_ratio=2, rope=True, max_sequence_length=16,
                             vocab_size=128, embedding_size=128, attention_dropout=0.0, residual_dropout=0.0,
                             embedding_dropout=0.0, init_device="cpu")
model = model_mod.Olmo(cfg)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
ids = torch.randint(0, 128, (2, 16))
mask = torch.ones(2, 16)
mask[1, :4] = 0  # the second sequence left-padded by four tokens


def step():
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(ids, attention_mask=mask).logits
        loss = torch.nn.functional.cross_entropy(logits.float()[mask.bool()], ids[mask.bool()])
    loss.backward()
    opt.step()


audited_step(ampdoctor.audit(policy="bf16-mixed", model=model), step)
