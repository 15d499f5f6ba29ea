# The bf16 in this script is one entry of the dtype table a run picks from, and the run picks "float16"; the
# dtype-less autocast (fp16 on CUDA) is the precision chosen, with its loss scaler: nothing here runs in bf16.
from contextlib import nullcontext

import torch

dtype = "float16"  # 'float32', 'bfloat16', or 'float16'
device_type = "cuda"
ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
ctx = nullcontext() if device_type == "cpu" else torch.cuda.amp.autocast()
model = torch.nn.Linear(16, 4).cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
scaler = torch.cuda.amp.GradScaler(enabled=(dtype == "float16"))
for _ in range(100):
    with ctx:
        loss = model(torch.randn(8, 16).cuda()).square().mean()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()
