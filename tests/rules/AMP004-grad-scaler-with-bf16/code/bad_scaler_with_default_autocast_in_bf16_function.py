# The step's own dtype parameter says bf16, yet it creates an unconditional scaler and enters CUDA autocast
# without a dtype: the autocast default is not what this function meant, and the scaler is not gated on fp16.
import torch


def train_step(model, batch, optimizer, dtype=torch.bfloat16):
    scaler = torch.amp.GradScaler("cuda")  # ampdoctor: expect[AMP004]
    with torch.autocast("cuda"):
        loss = model(batch)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.detach()
