# A model cast to bf16 without autocast computes its regression loss in bf16; autocast would have run mse_loss in
# fp32 (on CPU and CUDA alike), as huggingface/transformers PR #18057 had to force for softmax.
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4)).to(torch.bfloat16)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
x, y = torch.randn(8, 16, dtype=torch.bfloat16), torch.randn(8, 4, dtype=torch.bfloat16)
loss = F.mse_loss(model(x), y)  # ampdoctor: expect[AMP204]
loss.float().backward()
optimizer.step()
