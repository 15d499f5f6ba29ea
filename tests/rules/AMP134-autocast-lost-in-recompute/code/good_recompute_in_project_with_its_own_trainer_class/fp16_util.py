import torch


class MixedPrecisionTrainer:
    """fp32 master copies of a model cast to fp16, with a static loss scale."""

    def __init__(self, model, scale=2.0**16):
        self.model, self.scale = model, scale
        self.master = [p.detach().float().requires_grad_(True) for p in model.parameters()]
        self.opt = torch.optim.AdamW(self.master, lr=1e-4)

    def backward(self, loss):
        (loss * self.scale).backward()

    def step(self):
        for master, p in zip(self.master, self.model.parameters()):
            master.grad = p.grad.float() / self.scale
        self.opt.step()
        self.opt.zero_grad()
        for master, p in zip(self.master, self.model.parameters()):
            p.data.copy_(master.data)
            p.grad = None
