# The fix of allenai/OLMo PR #323 spelled out of place: the cast makes float32's min -inf, and the mask is rebound to
# a copy with every -inf replaced by bf16's own min before it is used, so no row is all -inf.
import torch

torch.manual_seed(0)
causal = torch.full((4, 4), float("-inf")).triu(1)
keep = torch.ones(2, 4)
keep[1, :2] = 0  # the second sequence left-padded by two tokens
bias = causal + ((1.0 - keep) * torch.finfo(torch.float32).min)[:, None, None, :]
q = torch.randn(2, 1, 4, 8, dtype=torch.bfloat16)
mask = bias.to(torch.bfloat16)
mask = mask.masked_fill(mask == float("-inf"), torch.finfo(mask.dtype).min)
out = torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=mask)
