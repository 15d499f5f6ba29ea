# Another benchmark of the same repository, which trains in fp16 with autocast's default on purpose: the bf16
# config of the benchmark beside it configures that benchmark's code, not this one.
import torch


def train_one_epoch(model, loader, optimizer):
    for images, targets in loader:
        with torch.autocast("cuda"):
            loss = model(images, targets)
        loss.backward()
        optimizer.step()
