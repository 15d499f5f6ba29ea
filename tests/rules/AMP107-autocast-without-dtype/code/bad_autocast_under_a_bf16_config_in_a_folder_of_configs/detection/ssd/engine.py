# The same training code, in a repository whose folder of configs at the top trains in bf16: that config governs
# every folder of code, so fp16 autocast contradicts it.
import torch


def train_one_epoch(model, loader, optimizer):
    for images, targets in loader:
        with torch.autocast("cuda"):  # ampdoctor: expect[AMP107]
            loss = model(images, targets)
        loss.backward()
        optimizer.step()
