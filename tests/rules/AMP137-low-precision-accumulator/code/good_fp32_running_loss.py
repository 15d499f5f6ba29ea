# Accumulators kept in fp32 or as Python floats; a bf16 residual stream summed in a forward is no running total.
import torch


def train(model, optimizer, loader, device):
    tr_loss = torch.zeros((), dtype=torch.float32, device=device)
    total = 0.0
    for x, y in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x, y)
        loss.backward()
        optimizer.step()
        tr_loss += loss.detach().float()
        total += loss.item()
    return tr_loss.item(), total


def forward(layers, x):
    hidden = torch.zeros_like(x, dtype=torch.bfloat16)
    for layer in layers:
        hidden += layer(x)
    return hidden


def once(loss):
    running_loss = torch.zeros((), dtype=torch.bfloat16)
    running_loss += loss
    return running_loss


def validate(model, loader):
    # a model that returns its own loss computes it from upcast logits: the sum is fp32
    model = model.bfloat16()
    val_loss = 0.0
    for x, y in loader:
        val_loss += model(x, y)
    return val_loss
