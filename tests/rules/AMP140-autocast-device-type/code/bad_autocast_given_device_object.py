# llm-foundry PR #302: the generation script entered autocast with the model's torch.device; autocast takes the
# device type as a string and raises "Expected `device_type` of type `str`".
from contextlib import nullcontext

import torch


def generate(model, batch, autocast_dtype=None):
    if autocast_dtype is not None:
        ctx = torch.autocast(model.device, autocast_dtype)  # ampdoctor: expect[AMP140]
    else:
        ctx = nullcontext()
    with ctx:
        return model.generate(**batch)


def evaluate(model, batch, rank):
    device = torch.device("cuda", rank)
    with torch.amp.autocast(device_type=device, dtype=torch.bfloat16):  # ampdoctor: expect[AMP140]
        return model(batch.to(device))
