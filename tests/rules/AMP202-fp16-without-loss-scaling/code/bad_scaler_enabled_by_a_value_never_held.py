# The run's dtype is spelled "fp16" (the table below raises on anything else), but the scaler waits for "float16":
# the comparison is never true, so fp16 training runs without loss scaling and nothing says so.
import argparse
from contextlib import nullcontext

import torch


class Runner:
    def __init__(self, model, optimizer, dtype):
        self.model, self.optimizer, self.dtype = model, optimizer, dtype

    def train_step(self, batch):
        compute = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[self.dtype]
        ctx = torch.autocast("cuda", dtype=compute) if compute != torch.float32 else nullcontext()
        scaler = torch.amp.GradScaler("cuda", enabled=(self.dtype == "float16"))  # ampdoctor: expect[AMP202]
        with ctx:
            loss = self.model(batch).mean()
        scaler.scale(loss).backward()
        scaler.step(self.optimizer)
        scaler.update()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="bf16")
    args = parser.parse_args()
    scaler = torch.amp.GradScaler("cuda", enabled=args.precision in ("half", "float16"))  # ampdoctor: expect[AMP202]
    return scaler
