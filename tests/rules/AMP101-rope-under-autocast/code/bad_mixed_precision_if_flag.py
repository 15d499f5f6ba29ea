# A trainer that turns fp16 mixed precision on from a flag (`'fp16' if fp16 else 'no'`, denoising-diffusion-pytorch's
# Trainer): the runs with the flag compute the angles' matmul under fp16 autocast.
import torch
from accelerate import Accelerator


def rope(position_ids, inv_freq):
    angles = position_ids[:, :, None].float() @ inv_freq[None, None, :].float()  # ampdoctor: expect[AMP101]
    return torch.cos(angles), torch.sin(angles)


class Trainer:
    def __init__(self, fp16=False):
        self.accelerator = Accelerator(mixed_precision="fp16" if fp16 else "no")
