"""Runtime reproduction of peft-intruders-svd-half: PEFT's own package (LoRA and its intruder-dimension mitigation,
tuners/lora/intruders.py), imported unmodified from the extracted tree (argv[1]/src), on a tiny bf16 Llama with its adapter in bf16 too (autocast_adapter_dtype=False: the whole model in one half dtype;
with fp32 adapters, base weight + delta is fp32 by promotion and the decomposition runs); under
``ampdoctor.audit(policy="bf16-true")`` one training step of the LoRA adapter, then `reduce_intruder_dimension` on
the trained model and a forward with the adapter it makes. Prints the findings as JSON."""

import importlib
import sys

import torch
from _common import peft_adapter_step


def reduce_and_run(model, ids):
    importlib.import_module("peft.tuners.lora.intruders").reduce_intruder_dimension(model, logging_sink=None)
    with torch.no_grad():
        model(input_ids=ids)


peft_adapter_step(sys.argv[1], lambda peft: peft.LoraConfig(r=4, target_modules=["q_proj", "v_proj"]), reduce_and_run,
                  autocast_adapter_dtype=False)
