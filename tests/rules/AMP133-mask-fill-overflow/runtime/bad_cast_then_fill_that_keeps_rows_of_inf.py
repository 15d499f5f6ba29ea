# The causal -inf and float32-min padding cast to bf16 as in the bad case, then a second mask (a document boundary
# of a packed row) filled in place with bf16's own min: a finite fill into the cast result, but it repairs nothing,
# and the left-padded sequence's first rows are still nothing but -inf.
import torch

torch.manual_seed(0)
causal = torch.full((4, 4), float("-inf")).triu(1)
keep = torch.ones(2, 4)
keep[1, :2] = 0  # the second sequence left-padded by two tokens
bias = causal + ((1.0 - keep) * torch.finfo(torch.float32).min)[:, None, None, :]
q = torch.randn(2, 1, 4, 8, dtype=torch.bfloat16)
mask = bias.to(torch.bfloat16)  # ampdoctor: expect[AMP133:warning]
boundary = torch.zeros(4, 4, dtype=torch.bool)
boundary[3, 0] = True  # the last query may not see the first key: another document
mask.masked_fill_(boundary, torch.finfo(mask.dtype).min)
out = torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=mask)
