# The backward and the step in two methods, with the unscale in a third: the file unscales, so nothing is said.
import torch
from torch.nn.utils import clip_grad_norm_


class SplitTrainer:
    def __init__(self, model, optimizer):
        self.model, self.optimizer = model, optimizer
        self.scaler = torch.amp.GradScaler("cuda")

    def backward(self, loss):
        self.scaler.scale(loss).backward()

    def before_clip(self):
        self.scaler.unscale_(self.optimizer)

    def optimizer_step(self, max_norm):
        clip_grad_norm_(self.model.parameters(), max_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
