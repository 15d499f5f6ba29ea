# The same table, but the run picks "bfloat16": the dtype-less autocast runs fp16 where bf16 was chosen.
from contextlib import nullcontext

import torch

dtype = "bfloat16"
device_type = "cuda"
ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
ctx = nullcontext() if device_type == "cpu" else torch.cuda.amp.autocast()  # ampdoctor: expect[AMP107]
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
