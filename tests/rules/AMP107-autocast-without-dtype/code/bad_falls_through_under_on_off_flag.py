# The chain sits under `if native_amp:`, a flag that is on for bf16 and fp16 runs alike (its default False is only
# a default): a bf16 run on a backend outside the list still reaches the `else` and autocasts in float16.
import torch


def autocast_context(native_amp: bool = False, precision: str = "no", backend: str = "ddp", **opts):
    if native_amp:
        if precision == "fp16":
            return torch.autocast(device_type="cuda", dtype=torch.float16, **opts)
        elif precision == "bf16" and backend in ("ddp", "fsdp"):
            return torch.autocast(device_type="cuda", dtype=torch.bfloat16, **opts)
        else:
            return torch.autocast(device_type="cuda", **opts)  # ampdoctor: expect[AMP107]
    return None
