import torch


def make_scaler(mixed_precision: str, **scaler_kwargs):
    if mixed_precision == "fp16":
        return torch.amp.GradScaler("cuda", **scaler_kwargs)
    elif mixed_precision == "bf16":
        return torch.amp.GradScaler("cuda", **scaler_kwargs)  # ampdoctor: expect[AMP004]
    return None
