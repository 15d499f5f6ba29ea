# The fix of allenai/OLMo PR #323: fill with the min of the dtype the mask is used in, so the cast keeps it finite.
import torch

torch.manual_seed(0)
keep = torch.ones(2, 4, dtype=torch.bool)
keep[1] = False
bias = torch.zeros(2, 4).masked_fill(~keep, torch.finfo(torch.bfloat16).min)[:, None, None, :]
q = torch.randn(2, 1, 4, 8, dtype=torch.bfloat16)
out = torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=bias.to(torch.bfloat16))

# A causal mask of float32's min cast to bf16 turns -inf, but every row keeps its diagonal: softmax stays finite.
causal = torch.zeros(4, 4).masked_fill(torch.ones(4, 4, dtype=torch.bool).triu(1), torch.finfo(torch.float32).min)
out = torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=causal.to(torch.bfloat16))
