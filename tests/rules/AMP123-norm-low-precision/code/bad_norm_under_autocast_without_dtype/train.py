# autocast without a dtype computes in fp16 on CUDA: the model it runs is in half precision all the same.
import torch

from lm.model import TinyLM


def main(loader):
    model = TinyLM().cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    scaler = torch.amp.GradScaler("cuda")
    for x in loader:
        with torch.autocast("cuda"):
            loss = model(x).float().square().mean()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
