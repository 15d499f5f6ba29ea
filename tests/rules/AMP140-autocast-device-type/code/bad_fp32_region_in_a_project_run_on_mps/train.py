import torch

from pkg.model import Modulation


def pick_device() -> str:
    if torch.cuda.is_available():
        return "cuda"
    if torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def main() -> None:
    device = pick_device()
    model = Modulation(8).to(device, dtype=torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters())
    loss = model(torch.randn(2, 8, device=device, dtype=torch.bfloat16)).float().pow(2).mean()
    loss.backward()
    opt.step()
