# The model file says nothing of its dtype; this trainer casts the model to bf16 and trains it without autocast.
import torch

from lm.model import TinyLM


def main(loader):
    model = TinyLM().to(torch.bfloat16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for ids in loader:
        loss = model(ids, labels=ids)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
