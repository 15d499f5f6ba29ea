# A fused SGD does not take the mixed pair: its kernel wants the gradient in the parameter's dtype, so the step
# fails where the unfused SGD would not.
import torch


def train(batches):
    net = torch.nn.Linear(32, 8)
    net.half()
    opt = torch.optim.SGD(net.parameters(), lr=0.05, fused=True)
    for x, y in batches:
        torch.nn.functional.cross_entropy(net(x).float(), y).backward()
        for w in net.parameters():
            w.grad = w.grad.float()  # ampdoctor: expect[AMP003:error]
        opt.step()
        opt.zero_grad()
