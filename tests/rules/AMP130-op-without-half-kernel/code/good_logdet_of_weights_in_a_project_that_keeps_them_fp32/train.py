# The project trains under bf16 autocast and never casts its model: the weight the logdet reads stays fp32 (a note).
import torch

from layers import Invertible1x1

model = Invertible1x1(8).cuda()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
for _ in range(10):
    z = torch.randn(4, 8, 16, device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out, log_det = model(z)
        loss = out.float().pow(2).mean() - log_det.float()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
