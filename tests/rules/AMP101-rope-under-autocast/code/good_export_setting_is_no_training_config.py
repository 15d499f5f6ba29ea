# A plain class's `mixed_precision` attribute (an export setting, no dataclass a parser fills) says nothing of the
# training config whose `mixed_precision` accelerate is handed: nothing shows this file's runs in a half mode.
import torch
from accelerate import Accelerator


class ExportSettings:
    mixed_precision: str = "fp16"


def rope(position_ids, inv_freq):
    angles = position_ids[:, :, None].float() @ inv_freq[None, None, :].float()
    return torch.cos(angles), torch.sin(angles)


def train(cfg):
    accelerator = Accelerator(mixed_precision=cfg.train.mixed_precision)
    return accelerator
