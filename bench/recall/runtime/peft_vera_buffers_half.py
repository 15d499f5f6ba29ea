"""Runtime reproduction of peft-vera-buffers-half: PEFT's own package (VeRA, `get_peft_model` with its default
autocast_adapter_dtype=True), imported unmodified from the extracted tree (argv[1]/src), on a tiny bf16 Llama; one
training step of the adapter under ``ampdoctor.audit(policy="bf16-true")``. Prints the findings as JSON."""

import sys
from pathlib import Path

import torch
from _common import audited_step, tiny_llama

import ampdoctor

sys.path.insert(0, str(Path(sys.argv[1]) / "src"))
from peft import VeraConfig, get_peft_model  # noqa: E402

torch.manual_seed(0)
model = get_peft_model(tiny_llama(torch.bfloat16), VeraConfig(r=8, target_modules=["q_proj", "v_proj"]))
opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
ids = torch.randint(0, 128, (2, 16))


def step():
    model(input_ids=ids, labels=ids).loss.backward()
    opt.step()


audited_step(ampdoctor.audit(policy="bf16-true", model=model), step)
