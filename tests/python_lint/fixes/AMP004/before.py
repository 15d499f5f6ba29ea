"""Fine-tuning in bf16 or fp16, chosen on the command line; the scalers are created for both."""
import argparse

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16"])
parser.add_argument("--amp", action="store_true")
args = parser.parse_args()
ptdtype = {"bfloat16": torch.bfloat16, "float16": torch.float16}[args.dtype]

model = torch.nn.Linear(16, 16).cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
scaler = torch.amp.GradScaler(
    "cuda",
    init_scale=2.0**14,  # a smaller first scale
)
probe_scaler = torch.amp.GradScaler("cuda", enabled=args.amp)


def train_step(x):
    with torch.autocast("cuda", dtype=ptdtype):
        loss = model(x).float().pow(2).mean()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    return probe_scaler.get_scale()
