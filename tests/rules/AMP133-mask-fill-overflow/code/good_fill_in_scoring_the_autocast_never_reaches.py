# The training step runs under fp16 autocast; the retrieval metric fills a matmul product with -1e9, but it is called
# only from the evaluation loop, outside any autocast, where the product is fp32 and -1e9 fits.
import torch
import torch.nn.functional as F


def retrieval_accuracy(queries, docs, pad):
    scores = queries @ docs.t()
    scores = scores.masked_fill(pad, -1e9)
    return (scores.argmax(-1) == torch.arange(len(queries))).float().mean()


def train_epoch(model, loader, opt, scaler):
    for q, d in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = F.mse_loss(model(q), model(d))
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()


@torch.no_grad()
def evaluate(model, loader):
    return [retrieval_accuracy(model(q), model(d), q.eq(0).all(-1)) for q, d in loader]
