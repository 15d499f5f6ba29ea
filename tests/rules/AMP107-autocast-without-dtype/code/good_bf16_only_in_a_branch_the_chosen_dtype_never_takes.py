# The model is cast to bf16 only in a branch for a bf16 run, and this script fixes its dtype to fp16: no run takes
# the branch, so the dtype-less autocast (fp16 on CUDA) is the precision chosen.
import torch

dtype = torch.float16
model = torch.nn.Linear(16, 4).cuda()
if dtype == torch.bfloat16:
    model = model.to(torch.bfloat16)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
for _ in range(100):
    with torch.autocast("cuda"):
        loss = model(torch.randn(8, 16).cuda()).square().mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
