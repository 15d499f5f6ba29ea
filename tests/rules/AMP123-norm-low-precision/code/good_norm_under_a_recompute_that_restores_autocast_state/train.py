# A recompute that restores the autocast state its forward saved (`**saved`, possibly off) enters no half autocast of
# its own: the script trains in fp32, and bf16 only names the checkpoint it saves.
import torch

from lm.model import TinyLM


def recompute(function, saved, *inputs):
    with torch.autocast("cuda", **saved):
        return function(*inputs)


def main(loader):
    model = TinyLM()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    saved = {"enabled": torch.is_autocast_enabled()}
    for x in loader:
        loss = recompute(model, saved, x).square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    torch.save({k: v.to(torch.bfloat16) for k, v in model.state_dict().items()}, "model_bf16.pt")
