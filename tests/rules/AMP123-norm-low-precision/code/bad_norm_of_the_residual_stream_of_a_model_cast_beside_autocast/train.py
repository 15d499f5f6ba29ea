# fp16 autocast around a model the script has cast to fp16 itself: autocast changes nothing of its weights.
import torch
import torch.nn.functional as F

from lm.model import TinyLM


def main(loader):
    model = TinyLM().cuda().half()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for idx, targets in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            logits = model(idx.cuda())
        loss = F.cross_entropy(logits.float().flatten(0, 1), targets.cuda().flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
