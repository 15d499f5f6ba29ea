"""Runtime reproduction of peft-intruders-svd-half: PEFT's own package (LoRA and its intruder-dimension mitigation,
tuners/lora/intruders.py), imported unmodified from the extracted tree (argv[1]/src), on a tiny bf16 Llama with its adapter in bf16 too (autocast_adapter_dtype=False: the whole model in one half dtype;
with fp32 adapters, base weight + delta is fp32 by promotion and the decomposition runs); under
``ampdoctor.audit(policy="bf16-true")`` one training step of the LoRA adapter, then `reduce_intruder_dimension` on
the trained model and a forward with the adapter it makes. Prints the findings as JSON."""

import importlib
import sys
from pathlib import Path

import torch
from _common import audited_step, tiny_llama

import ampdoctor

sys.path.insert(0, str(Path(sys.argv[1]) / "src"))
from peft import LoraConfig, get_peft_model  # noqa: E402

reduce_intruder_dimension = importlib.import_module("peft.tuners.lora.intruders").reduce_intruder_dimension

torch.manual_seed(0)
model = get_peft_model(tiny_llama(torch.bfloat16), LoraConfig(r=4, target_modules=["q_proj", "v_proj"]),
                       autocast_adapter_dtype=False)
opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
ids = torch.randint(0, 128, (2, 16))


def step():
    model(input_ids=ids, labels=ids).loss.backward()
    opt.step()
    reduce_intruder_dimension(model, logging_sink=None)
    with torch.no_grad():
        model(input_ids=ids)


audited_step(ampdoctor.audit(policy="bf16-true", model=model), step)
