import torch

from lib.rotary import RotaryEmbedding


def main(model, loader, optimizer):
    rotary = RotaryEmbedding(64)
    for x in loader:
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            freqs = rotary(x.shape[1])
            loss = model(x, freqs).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
