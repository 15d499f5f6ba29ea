"""Runtime reproduction of peft-vera-buffers-half: PEFT's own package (VeRA, `get_peft_model` with its default
autocast_adapter_dtype=True), imported unmodified from the extracted tree (argv[1]/src), on a tiny bf16 Llama; one
training step of the adapter under ``ampdoctor.audit(policy="bf16-true")``. Prints the findings as JSON."""

import sys

from _common import peft_adapter_step

peft_adapter_step(sys.argv[1], lambda peft: peft.VeraConfig(r=8, target_modules=["q_proj", "v_proj"]))
