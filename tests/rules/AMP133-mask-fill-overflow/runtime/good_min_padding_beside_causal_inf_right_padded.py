# The same causal -inf and float32-min padding cast to bf16, on a right-padded batch: every row keeps its first
# key, which is no padding, so no row is all -inf and softmax stays finite.
import torch

torch.manual_seed(0)
causal = torch.full((4, 4), float("-inf")).triu(1)
keep = torch.ones(2, 4)
keep[1, 2:] = 0  # the second sequence right-padded by two tokens
padding = ((1.0 - keep) * torch.finfo(torch.float32).min)[:, None, None, :]
q = torch.randn(2, 1, 4, 8, dtype=torch.bfloat16)
out = torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=(causal + padding).to(torch.bfloat16))
