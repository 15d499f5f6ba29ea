# The autocast block calls a step function of this file, which calls the model; the model's forward applies the
# Function through a module-level alias. The Function's matmul then meets bf16 activations and an fp32 weight.
import torch
from torch import nn


class _ScaledProjection(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight):  # ampdoctor: expect[AMP110:warning]
        ctx.save_for_backward(x, weight)
        return x @ weight.t()

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        return grad @ weight, grad.t() @ x


scaled_projection = _ScaledProjection.apply


class Head(nn.Module):
    def __init__(self, dim, vocab):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(vocab, dim))

    def forward(self, hidden):
        return scaled_projection(hidden, self.weight)


def step(model, batch):
    return model(batch).float().logsumexp(-1).mean()


def train(model, batches, opt):
    for batch in batches:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step(model, batch)
        loss.backward()
        opt.step()
