import torch

dtype = torch.bfloat16
scaler = torch.amp.GradScaler("cuda", enabled=dtype == torch.float16)


def make_scaler(compute):
    if compute != torch.float16:
        return None  # bf16 needs no loss scaling
    return torch.amp.GradScaler("cuda")
