# A trainer keeps a GradScaler per sub-network on itself and each method fetches it into a local (by index, or by
# attribute): the clip in `update` sees gradients that `backward`, another method, multiplied by the loss scale.
import torch
from torch import nn


class MultiNetTrainer(nn.Module):
    def __init__(self, nets, lr=1e-4, max_norm=1.0):
        super().__init__()
        self.nets = nn.ModuleList(nets)
        self.max_norm = max_norm
        for i, net in enumerate(nets):
            setattr(self, f"opt{i}", torch.optim.AdamW(net.parameters(), lr=lr))
            setattr(self, f"amp_scaler{i}", torch.amp.GradScaler("cuda"))

    def backward(self, loss, index):
        scaler = getattr(self, f"amp_scaler{index}")
        scaler.scale(loss).backward()

    def update(self, index):
        net = self.nets[index]
        nn.utils.clip_grad_norm_(net.parameters(), self.max_norm)  # ampdoctor: expect[AMP136]
        opt = getattr(self, f"opt{index}")
        scaler = getattr(self, f"amp_scaler{index}")
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()


class SingleNetTrainer:
    def __init__(self, net, opt):
        self.net, self.opt = net, opt
        self.loss_scaler = torch.amp.GradScaler("cuda")

    def backward(self, loss):
        s = self.loss_scaler
        s.scale(loss).backward()

    def step(self):
        torch.nn.utils.clip_grad_value_(self.net.parameters(), 0.5)  # ampdoctor: expect[AMP136]
        s = self.loss_scaler
        s.step(self.opt)
        s.update()
