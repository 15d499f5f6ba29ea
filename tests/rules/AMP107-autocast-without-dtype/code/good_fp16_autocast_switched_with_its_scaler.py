# Autocast without a dtype and a GradScaler switched on by the same `use_amp` flag: whenever autocast runs, the loss
# is scaled: fp16 AMP on purpose. The bf16 the file names is a dtype for saving snapshots, not a precision it runs in.
from contextlib import nullcontext

import torch

SNAPSHOT_DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}


def optimize(model, batches, opt, use_amp=True, snapshot="bf16"):
    scaler = torch.amp.GradScaler(enabled=use_amp)
    best = None
    for inputs, targets in batches:
        opt.zero_grad(set_to_none=True)
        ctx = torch.amp.autocast("cuda") if use_amp else nullcontext()
        with ctx:
            loss = torch.nn.functional.mse_loss(model(inputs).float(), targets)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        best = {k: v.to(SNAPSHOT_DTYPES[snapshot]) for k, v in model.state_dict().items()}
    return best
