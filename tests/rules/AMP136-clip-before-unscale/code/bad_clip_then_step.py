# Lightning #9599 and pytorch/examples #1196: the gradients are clipped while the GradScaler still has them
# multiplied by the loss scale, so max_norm=1.0 is compared with a norm ~65536 times too large.
import torch
from torch.nn.utils import clip_grad_norm_


def train(model, optimizer, loader):
    scaler = torch.amp.GradScaler("cuda")
    for x, y in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = torch.nn.functional.mse_loss(model(x), y)
        scaler.scale(loss).backward()
        clip_grad_norm_(model.parameters(), 1.0)  # ampdoctor: expect[AMP136]
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()


class Trainer:
    def __init__(self, model, optimizer):
        self.model, self.optimizer = model, optimizer
        self.grad_scaler = torch.cuda.amp.GradScaler()

    def step(self, batch, accumulate):
        loss = self.model(batch).mean() / accumulate
        self.grad_scaler.scale(loss).backward()
        if batch.index % accumulate == 0:
            torch.nn.utils.clip_grad_value_(self.model.parameters(), 0.5)  # ampdoctor: expect[AMP136]
            self.grad_scaler.step(self.optimizer)
            self.grad_scaler.update()


class SplitTrainer:
    """The backward and the step in two methods; nothing in the file unscales."""

    def __init__(self, model, optimizer):
        self.model, self.optimizer = model, optimizer
        self.scaler = torch.amp.GradScaler("cuda")

    def backward(self, loss):
        self.scaler.scale(loss).backward()

    def optimizer_step(self, max_norm):
        clip_grad_norm_(self.model.parameters(), max_norm)  # ampdoctor: expect[AMP136]
        self.scaler.step(self.optimizer)
        self.scaler.update()
