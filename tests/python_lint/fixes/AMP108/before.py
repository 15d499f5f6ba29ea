import torch
from accelerate.utils import is_torch_version


def train(model, loader, optimizer, use_amp):
    scaler = torch.cuda.amp.GradScaler(2.0**16, enabled=use_amp)  # the scale is kept
    for batch in loader:
        # autocast's first positional argument is `enabled`
        with torch.cuda.amp.autocast(use_amp, dtype=torch.bfloat16):
            loss = model(batch)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()


def evaluate(model, batch):
    with torch.cpu.amp.autocast():
        return model(batch)


def untouched(model, batch):
    with torch.cuda.amp.autocast():  # ampdoctor: ignore[AMP108]
        return model(batch)


def make_scaler(**kwargs):
    if is_torch_version(">=", "2.3"):
        return torch.amp.GradScaler("cuda", **kwargs)
    else:
        return torch.cuda.amp.GradScaler(**kwargs)  # the fallback for old torch stays
