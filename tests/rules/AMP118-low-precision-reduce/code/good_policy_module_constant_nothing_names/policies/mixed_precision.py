# The policies module offers a bf16 policy that no file of the project names (the trainer wraps in fp32): a
# note on a value the project offers, not a warning on its runs.
import torch
from torch.distributed.fsdp import MixedPrecision

fp32_policy = MixedPrecision(param_dtype=torch.float32, reduce_dtype=torch.float32, buffer_dtype=torch.float32)

bf16_policy = MixedPrecision(
    param_dtype=torch.bfloat16,
    reduce_dtype=torch.bfloat16,  # ampdoctor: expect[AMP118:info]
    buffer_dtype=torch.bfloat16,
)
