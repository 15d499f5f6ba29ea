# flash-attn ships more than attention: its fused layer_norm takes the input, the weight and the bias, and accepts a
# half input with fp32 weights. A norm's fp32 output going into it under autocast is no q/k/v of an attention kernel.
import torch
from flash_attn.ops.layer_norm import layer_norm
from torch import nn


class Embeddings(nn.Module):
    def __init__(self, vocab: int, dim: int, fused: bool):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pre_ln = nn.LayerNorm(dim)
        self.emb_ln = nn.LayerNorm(dim)
        self.fused = fused

    def forward(self, ids):
        h = self.pre_ln(self.tok(ids))
        if self.fused:
            return layer_norm(h, self.emb_ln.weight, self.emb_ln.bias, self.emb_ln.eps)
        return self.emb_ln(h)


def train_step(model, batch, optimizer):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(batch).float().pow(2).mean()
    loss.backward()
    optimizer.step()
