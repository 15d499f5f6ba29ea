import torch

model = torch.nn.Linear(4, 4).to(torch.bfloat16)
scaler = torch.amp.GradScaler("cuda")  # ampdoctor: expect[AMP004:error]
with torch.autocast("cuda", dtype=torch.bfloat16):
    loss = model(torch.randn(2, 4, dtype=torch.bfloat16)).sum()
scaler.scale(loss).backward()
