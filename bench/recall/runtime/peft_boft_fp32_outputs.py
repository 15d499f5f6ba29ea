"""Runtime reproduction of peft-boft-fp32-outputs: PEFT's own package (BOFT, `get_peft_model` with its defaults),
imported unmodified from the extracted tree (argv[1]/src), on a tiny bf16 Llama; one training step of the adapter
under ``ampdoctor.audit(policy="bf16-true")``. Prints the findings as JSON.

BOFT builds a CUDA extension when it can; the extracted tree holds no C++/CUDA sources, so it takes its own
torch fallback (block_diag), as on a machine without a GPU."""

import sys

from _common import peft_adapter_step

peft_adapter_step(sys.argv[1], lambda peft: peft.BOFTConfig(boft_block_size=4, target_modules=["q_proj", "v_proj"]))
