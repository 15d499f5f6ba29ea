# Builds the model and the trainer, whose step keeps autocast off.
import torch

from lm.model import TinyLM
from lm.trainer import Trainer


def main(loader, bf16: bool = True):
    model = TinyLM()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    Trainer(model, optimizer, torch.bfloat16 if bf16 else torch.float32).fit(loader)
