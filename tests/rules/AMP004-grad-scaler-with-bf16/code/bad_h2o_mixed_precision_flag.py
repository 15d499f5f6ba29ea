# h2oai/h2o-llmstudio#628 (incident 4): the scaler is gated on "mixed precision", which says nothing about the
# dtype; the backbone is bf16, so GradScaler.unscale_ runs on bf16 gradients.
import torch
from torch.cuda.amp import GradScaler, autocast


def build(cfg):
    backbone = load_backbone(cfg, torch_dtype=torch.bfloat16)
    scaler = GradScaler(enabled=cfg.environment.mixed_precision)  # ampdoctor: expect[AMP004:error]
    return backbone, scaler


def train_step(cfg, model, batch, optimizer, scaler):
    with autocast(enabled=cfg.environment.mixed_precision, dtype=torch.bfloat16):
        loss = model(batch)["loss"]
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
