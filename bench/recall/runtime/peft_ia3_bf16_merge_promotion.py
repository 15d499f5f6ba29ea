"""Runtime reproduction of peft-ia3-bf16-merge-promotion: PEFT's own package ((IA)^3), imported unmodified from the
extracted tree (argv[1]/src), on a tiny bf16 Llama; under ``ampdoctor.audit(policy="bf16-true")`` one training step
of the adapter, then PEFT's `merge_and_unload` and a forward of the merged model (the use the merge is for). Prints
the findings as JSON."""

import sys

import torch
from _common import peft_adapter_step


def merge_and_run(model, ids):
    merged = model.merge_and_unload()
    with torch.no_grad():
        merged(input_ids=ids)


peft_adapter_step(sys.argv[1], lambda peft: peft.IA3Config(target_modules=["q_proj", "v_proj", "down_proj"],
                                                           feedforward_modules=["down_proj"]), merge_and_run)
