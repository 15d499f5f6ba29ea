# The fix of allenai/OLMo PR #323 where the mask is cast to the attention's dtype: float32's min becomes -inf in the
# cast, and the next line replaces every -inf by bf16's own min before the mask is used, so no row is all -inf.
import torch

torch.manual_seed(0)
causal = torch.full((4, 4), float("-inf")).triu(1)
keep = torch.ones(2, 4)
keep[1, :2] = 0  # the second sequence left-padded by two tokens
bias = causal + ((1.0 - keep) * torch.finfo(torch.float32).min)[:, None, None, :]
q = torch.randn(2, 1, 4, 8, dtype=torch.bfloat16)
mask = bias.to(torch.bfloat16)
mask.masked_fill_(mask == float("-inf"), torch.finfo(mask.dtype).min)
out = torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=mask)
