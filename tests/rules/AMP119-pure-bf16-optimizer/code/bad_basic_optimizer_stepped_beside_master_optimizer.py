# The engine wraps its optimizer in a master-weight optimizer on one path only; on the path below it steps the plain
# optimizer itself, which then updates the bf16 weights in place.
import torch
from deepspeed.runtime.bf16_optimizer import BF16_Optimizer


class Engine:
    def __init__(self, module, lr=1e-4, master=False):
        self.module = module.to(torch.bfloat16)
        self.lr = lr
        self.master = master

    def wrapped(self):
        return BF16_Optimizer(torch.optim.SGD(self.module.parameters(), lr=self.lr), param_names={})

    def train(self, batches):
        optimizer = torch.optim.AdamW(self.module.parameters(), lr=self.lr)  # ampdoctor: expect[AMP119]
        for x in batches:
            loss = self.module(x).float().pow(2).mean()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
