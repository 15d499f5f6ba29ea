# A config dataclass whose `mixed_precision` field defaults to fp16 (TRL's DDPOConfig), handed to accelerate: the
# angles' matmul runs under fp16 autocast unless a run says otherwise.
from dataclasses import dataclass

import torch
from accelerate import Accelerator


@dataclass
class TrainConfig:
    mixed_precision: str = "fp16"


def rope(position_ids, inv_freq):
    angles = position_ids[:, :, None].float() @ inv_freq[None, None, :].float()  # ampdoctor: expect[AMP101]
    return torch.cos(angles), torch.sin(angles)


def train(config: TrainConfig):
    accelerator = Accelerator(mixed_precision=config.mixed_precision)
    return accelerator
