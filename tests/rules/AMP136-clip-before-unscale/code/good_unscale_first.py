# The order the PyTorch AMP notes give: unscale, then clip, then step; and the near misses that need no unscale.
import torch
from torch.nn.utils import clip_grad_norm_


def train(model, optimizer, loader, accumulate):
    scaler = torch.amp.GradScaler("cuda")
    for i, (x, y) in enumerate(loader):
        with torch.autocast("cuda", dtype=torch.float16):
            loss = torch.nn.functional.mse_loss(model(x), y) / accumulate
        scaler.scale(loss).backward()
        if (i + 1) % accumulate == 0:
            scaler.unscale_(optimizer)
            clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()


def train_accelerate(accelerator, model, optimizer, batch):
    # accelerate's clip_grad_norm_ unscales the gradients itself
    loss = model(batch).mean()
    accelerator.backward(loss)
    accelerator.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()


def log_norm(model, optimizer, loss):
    scaler = torch.amp.GradScaler("cuda", enabled=False)
    scaler.scale(loss).backward()
    clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)


def measure_only(model, optimizer, loss, scaler):
    scaler.scale(loss).backward()
    norm = clip_grad_norm_(model.parameters(), float("inf"))
    scaler.step(optimizer)
    return norm
