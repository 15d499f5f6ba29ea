# The same runner comparing with the spelling its setting holds, a setting with no closed set of values (nothing
# here says "float16" is not one of them), and a scaler gated on bf16 (AMP004's concern, not this rule's).
import argparse

import torch


class Runner:
    def __init__(self, model, optimizer, dtype):
        self.model, self.optimizer, self.dtype = model, optimizer, dtype

    def train_step(self, batch):
        compute = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[self.dtype]
        scaler = torch.amp.GradScaler("cuda", enabled=(self.dtype == "fp16"))
        with torch.autocast("cuda", dtype=compute, enabled=compute != torch.float32):
            loss = self.model(batch).mean()
        scaler.scale(loss).backward()
        scaler.step(self.optimizer)
        scaler.update()


def open_setting(cfg):
    return torch.amp.GradScaler("cuda", enabled=cfg.dtype == "float16")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--precision", choices=["fp32", "bf16", "float16"], default="bf16")
    parser.add_argument("--mode", choices=["fp32", "bf16"], default="bf16")
    args = parser.parse_args()
    scaler = torch.amp.GradScaler("cuda", enabled=args.precision == "float16")
    never_fp16 = torch.amp.GradScaler("cuda", enabled=args.mode == "fp16")  # no fp16 run at all: nothing to scale
    return scaler, never_fp16
