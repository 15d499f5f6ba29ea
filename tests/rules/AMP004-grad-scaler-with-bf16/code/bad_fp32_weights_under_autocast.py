# The milder situation of AMP004: the weights this file builds stay fp32 and only autocast runs in bf16, so the
# gradients are fp32 and unscale fine; the ungated scaler only scales for nothing. A note (info), as Policy.validate
# says of params=fp32,compute=bf16,loss_scale=dynamic (bad.py, with bf16 weights, is the error).
import torch

model = torch.nn.Linear(4, 4)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cuda")  # ampdoctor: expect[AMP004:info]
with torch.autocast("cuda", dtype=torch.bfloat16):
    loss = model(torch.randn(2, 4)).sum()
scaler.scale(loss).backward()
scaler.step(optimizer)
scaler.update()
