# The trainer picks the bf16 policy by its name for bf16 runs: its gradients are reduced in bf16.
import torch
from torch.distributed.fsdp import MixedPrecision

fp32_policy = MixedPrecision(param_dtype=torch.float32, reduce_dtype=torch.float32, buffer_dtype=torch.float32)

bf16_policy = MixedPrecision(
    param_dtype=torch.bfloat16,
    reduce_dtype=torch.bfloat16,  # ampdoctor: expect[AMP118]
    buffer_dtype=torch.bfloat16,
)
