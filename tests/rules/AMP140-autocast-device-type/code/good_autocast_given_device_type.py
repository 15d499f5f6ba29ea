# The same scripts passing the device type: a string, as autocast takes it.
from contextlib import nullcontext

import torch


def generate(model, batch, autocast_dtype=None):
    if autocast_dtype is not None:
        ctx = torch.autocast(model.device.type, autocast_dtype)
    else:
        ctx = nullcontext()
    with ctx:
        return model.generate(**batch)


def evaluate(model, batch, rank):
    device = torch.device("cuda", rank)
    with torch.amp.autocast(device_type=device.type, dtype=torch.bfloat16):
        return model(batch.to(device))


class Plugin:
    # a precision plugin's `device` is the type string it was given
    def __init__(self, device: str = "cuda") -> None:
        self.device = device

    def forward_context(self):
        return torch.autocast(self.device, dtype=torch.bfloat16)
