# A helper turns a 0/1 padding mask into an additive bias in the dtype it is given, fp16 by default, and the encoder
# call leaves that default: a model run in fp32 (or bf16) without autocast gets an fp16 float mask beside queries of
# its own dtype, which SDPA refuses ("Expected attn_mask dtype to be bool or float or to match query dtype").
import torch
from torch import nn


class TextTower(nn.Module):
    def __init__(self, embeddings, encoder):
        super().__init__()
        self.embeddings = embeddings
        self.encoder = encoder

    def padding_bias(self, keep, dtype=torch.float16):
        bias = keep[:, None, None, :].to(dtype=dtype)
        return (1.0 - bias) * torch.finfo(dtype).min

    def forward(self, ids, keep):
        bias = self.padding_bias(keep)  # ampdoctor: expect[AMP122:info]
        hidden = self.embeddings(ids)
        return self.encoder(hidden, attention_mask=bias)
