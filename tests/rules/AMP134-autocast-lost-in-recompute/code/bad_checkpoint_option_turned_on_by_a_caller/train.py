import torch

from model import UNet

model = UNet(64, depth=4, use_checkpoint=True)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
for _ in range(10):
    x = torch.randn(8, 64, requires_grad=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(x).float().pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
