# transformers PR #8561: the running loss lived in a bf16 tensor and stopped growing after ~1000 steps.
import torch


def train(model, optimizer, loader, device):
    tr_loss = torch.zeros((), dtype=torch.bfloat16, device=device)
    correct = torch.tensor(0.0).to(torch.float16)
    for step, (x, y) in enumerate(loader):
        loss = model(x, y)
        loss.backward()
        optimizer.step()
        tr_loss += loss.detach()  # ampdoctor: expect[AMP137]
        correct.add_((model(x).argmax(-1) == y).sum())  # ampdoctor: expect[AMP137]
    return tr_loss.item() / (step + 1)


def evaluate(predict, loader):
    total_loss = 0.0
    for x, y in loader:
        batch_loss = (predict(x) - y).pow(2).mean().bfloat16()
        total_loss = total_loss + batch_loss  # ampdoctor: expect[AMP137]
    return total_loss
