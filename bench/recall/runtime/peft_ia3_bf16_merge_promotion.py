"""Runtime reproduction of peft-ia3-bf16-merge-promotion: PEFT's own package ((IA)^3), imported unmodified from the
extracted tree (argv[1]/src), on a tiny bf16 Llama; under ``ampdoctor.audit(policy="bf16-true")`` one training step
of the adapter, then PEFT's `merge_and_unload` and a forward of the merged model (the use the merge is for). Prints
the findings as JSON."""

import sys
from pathlib import Path

import torch
from _common import audited_step, tiny_llama

import ampdoctor

sys.path.insert(0, str(Path(sys.argv[1]) / "src"))
from peft import IA3Config, get_peft_model  # noqa: E402

torch.manual_seed(0)
model = get_peft_model(tiny_llama(torch.bfloat16), IA3Config(target_modules=["q_proj", "v_proj", "down_proj"],
                                                             feedforward_modules=["down_proj"]))
opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
ids = torch.randint(0, 128, (2, 16))


def step():
    model(input_ids=ids, labels=ids).loss.backward()
    opt.step()
    merged = model.merge_and_unload()
    with torch.no_grad():
        merged(input_ids=ids)


audited_step(ampdoctor.audit(policy="bf16-true", model=model), step)
