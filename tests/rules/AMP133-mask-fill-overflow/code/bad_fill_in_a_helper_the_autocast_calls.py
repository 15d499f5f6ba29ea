# The fp16 autocast block calls a helper of this file that fills the attention product with -1e9: the product is
# fp16 there, and -1e9 overflows fp16's range (65504) to -inf.
import torch


def masked_scores(q, k, pad):
    scores = q @ k.transpose(-2, -1)
    return scores.masked_fill(pad, -1e9)  # ampdoctor: expect[AMP133]


def train_step(encoder, batch, opt, scaler):
    with torch.autocast("cuda", dtype=torch.float16):
        q, k = encoder(batch.tokens)
        loss = masked_scores(q, k, batch.pad).softmax(-1).square().mean()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
