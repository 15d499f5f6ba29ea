# fp16 autocast with a GradScaler; the model is never cast.
import torch
import torch.nn.functional as F

from lm.model import TinyLM


def main(loader):
    model = TinyLM().cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    scaler = torch.amp.GradScaler("cuda")
    for idx, targets in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            logits = model(idx.cuda())
        loss = F.cross_entropy(logits.float().flatten(0, 1), targets.cuda().flatten())
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
