# A causal mask of -inf plus a padding mask of float32's min, added in fp32 and cast to the bf16 the attention runs
# in (allenai/OLMo PR #323): the padding becomes -inf too, and a left-padded sequence's first rows, which see only
# padding and the causally masked future, are nothing but -inf: NaN in softmax.
import torch

torch.manual_seed(0)
causal = torch.full((4, 4), float("-inf")).triu(1)
keep = torch.ones(2, 4)
keep[1, :2] = 0  # the second sequence left-padded by two tokens
padding = ((1.0 - keep) * torch.finfo(torch.float32).min)[:, None, None, :]
bias = causal + padding
q = torch.randn(2, 1, 4, 8, dtype=torch.bfloat16)
mask = bias.to(torch.bfloat16)  # ampdoctor: expect[AMP133:warning]
out = torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=mask)
