# The model is cast to bf16 in a branch for a bf16 run, and this script fixes its dtype to bf16: the run takes the
# branch, and the dtype-less autocast beside it computes in fp16 (its CUDA default), not in bf16.
import torch

dtype = torch.bfloat16
model = torch.nn.Linear(16, 4).cuda()
if dtype == torch.bfloat16:
    model = model.to(torch.bfloat16)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
for _ in range(100):
    with torch.autocast("cuda"):  # ampdoctor: expect[AMP107]
        loss = model(torch.randn(8, 16).cuda()).square().mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
