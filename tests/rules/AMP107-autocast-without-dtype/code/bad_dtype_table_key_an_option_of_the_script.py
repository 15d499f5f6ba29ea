# The table is looked up by a command-line option whose default picks fp16; nothing in the project launches the
# script, so `--dtype bfloat16` is the user's to pass, and then the dtype-less autocast is fp16.
import argparse

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--dtype", default="float16")
args = parser.parse_args()
ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[args.dtype]
model = torch.nn.Linear(16, 4).cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
for _ in range(100):
    with torch.cuda.amp.autocast():  # ampdoctor: expect[AMP107]
        loss = model(torch.randn(8, 16).cuda()).square().mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
