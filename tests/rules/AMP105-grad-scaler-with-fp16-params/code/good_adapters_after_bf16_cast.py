# A bf16 run: the cast dtype is never fp16, and accelerate brings no GradScaler for bf16.
import torch
from accelerate import Accelerator
from peft import LoraConfig


def main(model):
    accelerator = Accelerator(mixed_precision="bf16")
    model.to(accelerator.device, dtype=torch.bfloat16)
    model.add_adapter(LoraConfig(r=8))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return accelerator.prepare(model, optimizer)
