# The fix of h2oai/h2o-llmstudio#628 (#672): the scaler is enabled only when the autocast dtype is float16.
import torch
from torch.amp import GradScaler, autocast


def build(cfg):
    backbone = load_backbone(cfg, torch_dtype=torch.bfloat16)
    scaler = GradScaler("cuda", enabled=cfg.environment.mixed_precision_dtype == "float16")
    return backbone, scaler


def train_step(cfg, model, batch, optimizer, scaler):
    with autocast("cuda", enabled=cfg.environment.mixed_precision, dtype=torch.bfloat16):
        loss = model(batch)["loss"]
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
