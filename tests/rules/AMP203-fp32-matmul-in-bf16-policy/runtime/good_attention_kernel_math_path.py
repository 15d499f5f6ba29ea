# A bf16-mixed step whose attention runs with dropout: CPU's SDPA takes its math path, which upcasts the bf16 q/k/v to
# fp32 for its own bmm. Those fp32 matmuls are the kernel's choice, not fp32 the caller left in the step.
# ampdoctor: policy=bf16-mixed
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)


class Attention(nn.Module):
    def __init__(self, dim=16, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, h):
        b, s, d = h.shape
        q, k, v = self.qkv(h).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.1, is_causal=True)
        return out.transpose(1, 2).reshape(b, s, d)


model = Attention()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
with torch.autocast("cpu", dtype=torch.bfloat16):
    out = model(torch.randn(2, 64, 16))
out.float().pow(2).mean().backward()
optimizer.step()
