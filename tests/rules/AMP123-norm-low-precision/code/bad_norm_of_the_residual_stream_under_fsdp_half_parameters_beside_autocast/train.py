# fp16 autocast around a model FSDP shards with fp16 parameters: FSDP casts the weights for the forward.
import torch
import torch.nn.functional as F
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, MixedPrecision

from lm.model import TinyLM


def main(loader):
    policy = MixedPrecision(param_dtype=torch.float16, reduce_dtype=torch.float32, buffer_dtype=torch.float16)
    model = FSDP(TinyLM().cuda(), mixed_precision=policy)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for idx, targets in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            logits = model(idx.cuda())
        loss = F.cross_entropy(logits.float().flatten(0, 1), targets.cuda().flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
