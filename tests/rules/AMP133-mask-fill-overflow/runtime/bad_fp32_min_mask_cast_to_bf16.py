# allenai/OLMo PR #323: a padding mask built in fp32 with float32's min, cast to the bf16 the attention runs in.
# float32's min is beyond bf16's range: the masked positions become -inf, and a fully padded row is NaN.
import torch

torch.manual_seed(0)
keep = torch.ones(2, 4, dtype=torch.bool)
keep[1] = False  # a padding-only sequence
bias = torch.zeros(2, 4).masked_fill(~keep, torch.finfo(torch.float32).min)[:, None, None, :]
q = torch.randn(2, 1, 4, 8, dtype=torch.bfloat16)
mask = bias.to(torch.bfloat16)  # ampdoctor: expect[AMP133:warning]
out = torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=mask)
