# A bf16 model whose gradients are widened to fp32 after each backward. torch accumulates the next backward into
# the fp32 .grad, but AdamW keeps its moments in the parameter's dtype and its step() fails on the mixed pair.
import torch


def train(batches):
    net = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.GELU(), torch.nn.Linear(16, 1))
    net = net.to(torch.bfloat16)
    opt = torch.optim.AdamW(net.parameters(), lr=3e-4, weight_decay=0.01)
    for i, (x, y) in enumerate(batches):
        torch.nn.functional.mse_loss(net(x).float(), y).backward()
        for w in net.parameters():
            if w.grad is not None:
                w.grad.data = w.grad.data.float()  # ampdoctor: expect[AMP003:error]
        if i % 4 == 3:
            opt.step()
            opt.zero_grad()
