# Every bf16 run takes the bf16 branch; the `else` is for the other precisions, and the keyword dict is the
# caller's business.
import torch


def autocast_for(precision: str, opts: dict):
    if precision == "fp16":
        return torch.autocast(device_type="cuda", dtype=torch.float16, **opts)
    elif precision == "bf16":
        return torch.autocast(device_type="cuda", dtype=torch.bfloat16, **opts)
    else:
        return torch.autocast(device_type="cuda", **opts)


def autocast_from(kwargs: dict):
    return torch.autocast("cuda", **kwargs)
