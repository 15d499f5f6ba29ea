import torch

from rotary import CachedRotaryEmbedding, InlineRotaryEmbedding


def train_step(model, batch, optimizer):
    rotary = CachedRotaryEmbedding(64) if batch["cached"] else InlineRotaryEmbedding(64)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(rotary, **batch).loss
    loss.backward()
    optimizer.step()
