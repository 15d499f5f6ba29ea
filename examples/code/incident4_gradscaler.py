"""Incident 4 (h2oai/h2o-llmstudio#628): a bf16 backbone with mixed precision builds a GradScaler
unconditionally; `scaler.step` then fails with "_amp_foreach_non_finite_check_and_unscale_cuda" not implemented
for 'BFloat16'. `ampdoctor lint` reports grad-scaler-with-bf16 on line 15 and deprecated-cuda-amp on line 6."""

import torch
from torch.cuda.amp import GradScaler

from llm_studio.utils import get_model, get_optimizer


def run_train(cfg, train_dataloader):
    model = get_model(cfg)
    optimizer = get_optimizer(model, cfg)
    if cfg.environment.mixed_precision:
        scaler = GradScaler()
    for batch in train_dataloader:
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cfg.environment.mixed_precision):
            output = model(batch)
        loss = output["loss"]
        if cfg.environment.mixed_precision:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        optimizer.zero_grad()
