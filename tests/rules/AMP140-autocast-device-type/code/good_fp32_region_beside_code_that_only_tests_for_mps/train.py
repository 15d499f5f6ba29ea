import torch

from pkg.model import Modulation


def timestep_tensor(step, sample: torch.Tensor) -> torch.Tensor:
    is_mps = sample.device.type == "mps"
    if isinstance(step, float):
        dtype = torch.float32 if is_mps else torch.float64
    else:
        dtype = torch.int32 if is_mps else torch.int64
    return torch.tensor([step], dtype=dtype, device=sample.device)


def main() -> None:
    model = Modulation(8).to("cuda", dtype=torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters())
    x = torch.randn(2, 8, device="cuda", dtype=torch.bfloat16)
    loss = (model(x).float().pow(2).mean() + timestep_tensor(3, x).float().sum() * 0)
    loss.backward()
    opt.step()
