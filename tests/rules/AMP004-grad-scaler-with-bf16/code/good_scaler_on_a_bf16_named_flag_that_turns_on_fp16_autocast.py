# The flag is called use_bfloat16, but what it switches on is float16 autocast: the scaler it gates is the one
# fp16 AMP needs, whatever the flag's name says.
import torch


def make_optimizer(model, use_bfloat16=False):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.cuda.amp.GradScaler() if use_bfloat16 else None
    return optimizer, scaler


def train_epoch(model, loader, optimizer, scaler, use_bfloat16):
    for x, y in loader:
        with torch.cuda.amp.autocast(dtype=torch.float16, enabled=use_bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        if use_bfloat16:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        optimizer.zero_grad()
