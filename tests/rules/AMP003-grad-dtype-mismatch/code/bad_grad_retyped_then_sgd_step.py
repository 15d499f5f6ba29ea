# The same widening with plain SGD: the next backward accumulates into the fp32 .grad and SGD updates the bf16
# weight from it without failing, so nothing stops the run; the gradient no longer has the parameter's dtype.
import torch


def train(batches):
    net = torch.nn.Linear(32, 8)
    net = net.to(torch.bfloat16)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    for i, (x, y) in enumerate(batches):
        torch.nn.functional.cross_entropy(net(x).float(), y).backward()
        for _, w in net.named_parameters():
            w.grad = w.grad.to(torch.float32)  # ampdoctor: expect[AMP003:warning]
        if i % 2 == 1:
            opt.step()
            opt.zero_grad()
