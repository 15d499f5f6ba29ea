# The project casts its model to fp16 for training: the weight the logdet reads is half.
import torch

from layers import Invertible1x1

model = Invertible1x1(8).cuda().half()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
for _ in range(10):
    z = torch.randn(4, 8, 16, device="cuda", dtype=torch.float16)
    out, log_det = model(z)
    loss = out.float().pow(2).mean() - log_det.float()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
