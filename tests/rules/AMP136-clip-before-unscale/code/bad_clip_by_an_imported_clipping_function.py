# The project's own clipping helper is imported and called between the scaled backward and the step: it clips the
# gradients still multiplied by the loss scale, so the threshold is compared with a norm 65536 times too large.
import torch

from utils.optim import clip_grad_norm


class Step:
    def __init__(self, model, opt, max_norm):
        self.model, self.opt, self.max_norm = model, opt, max_norm
        self.scaler = torch.amp.GradScaler("cuda")

    def backward(self, batch):
        with torch.autocast("cuda", dtype=torch.float16):
            loss = self.model(batch).float().mean()
        self.scaler.scale(loss).backward()

    def step(self):
        clip_grad_norm(self.model.parameters(), self.max_norm)  # ampdoctor: expect[AMP136]
        self.scaler.step(self.opt)
        self.scaler.update()
