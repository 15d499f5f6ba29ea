# The model is cast to bf16 for a pure-bf16 run, and the plain AdamW built for it is handed to the training loop of
# another module, which steps it: nothing keeps fp32 master weights.
import torch
from torch import optim
from transformers import AutoModelForCausalLM

from .train_utils import train


def main(train_config, fsdp_config, loader):
    model = AutoModelForCausalLM.from_pretrained(train_config.model_name)
    if fsdp_config.pure_bf16:
        model.to(torch.bfloat16)
    optimizer = optim.AdamW(model.parameters(), lr=train_config.lr)  # ampdoctor: expect[AMP119]
    return train(model, loader, optimizer, train_config)
