# The branches choose by the model's version, not torch's: a version-1 model on a current torch enters CUDA autocast
# without a dtype, which is fp16, in a trainer that runs bf16 for version 2.
import torch


def autocast_for(model_version: int):
    if model_version >= 2:
        return torch.autocast("cuda", dtype=torch.bfloat16)
    else:
        return torch.autocast("cuda")  # ampdoctor: expect[AMP107]
