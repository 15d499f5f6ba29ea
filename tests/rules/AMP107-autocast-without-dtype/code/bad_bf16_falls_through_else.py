# A bf16 run whose second condition fails takes the `else`, and autocast there defaults to float16 on CUDA.
# The `**opts` cannot hold a dtype: the branches above pass `dtype=` beside the same `**opts`.
import torch


def autocast_for(precision: str, backend: str, opts: dict):
    if precision == "fp16":
        return torch.autocast(device_type="cuda", dtype=torch.float16, **opts)
    elif precision == "bf16" and backend in ("ddp", "fsdp"):
        return torch.autocast(device_type="cuda", dtype=torch.bfloat16, **opts)
    else:
        return torch.autocast(device_type="cuda", **opts)  # ampdoctor: expect[AMP107]
