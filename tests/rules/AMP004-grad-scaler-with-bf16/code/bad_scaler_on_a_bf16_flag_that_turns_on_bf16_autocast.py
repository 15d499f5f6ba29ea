# The same flag, switching on the bf16 autocast its name says: the scaler exists only in the runs that need none.
import torch


def make_optimizer(model, use_bfloat16=False):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.cuda.amp.GradScaler() if use_bfloat16 else None  # ampdoctor: expect[AMP004:warning]
    return optimizer, scaler


def train_epoch(model, loader, optimizer, scaler, use_bfloat16):
    for x, y in loader:
        with torch.cuda.amp.autocast(dtype=torch.bfloat16, enabled=use_bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        if use_bfloat16:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        optimizer.zero_grad()
