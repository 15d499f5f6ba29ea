# The reduce dtype is read from the run's config object, and the config the project ships for its large runs
# sets `fsdp.reduce_dtype: bf16`: those runs reduce-scatter every gradient in bf16.
import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import MixedPrecision

DTYPES = {"float32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def wrap(model, cfg):
    policy = MixedPrecision(
        param_dtype=DTYPES[cfg.fsdp.param_dtype],
        reduce_dtype=DTYPES[cfg.fsdp.reduce_dtype],  # ampdoctor: expect[AMP118]
    )
    return FSDP(model, mixed_precision=policy)


def train(cfg):
    model = wrap(torch.nn.Linear(8, 8), cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.optim.lr)
    for _ in range(cfg.optim.steps):
        loss = model(torch.randn(4, 8)).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
