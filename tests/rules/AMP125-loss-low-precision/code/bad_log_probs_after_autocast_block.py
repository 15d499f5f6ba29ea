# The policy runs under half autocast, but its log-probabilities are taken after the block: its logits are half and
# the log-softmax, out of autocast, keeps their precision (inside the block autocast would run it in fp32).
from contextlib import nullcontext

import torch
import torch.nn.functional as F


def ppo_epoch(policy, batches, old_logp, autocast_ctx):
    for ids, mask, index in batches:
        with autocast_ctx:
            res = policy(input_ids=ids, attention_mask=mask)
        logp = F.log_softmax(res.logits[:, :-1], dim=-1).gather(2, ids[:, 1:].unsqueeze(-1)).squeeze(-1)  # ampdoctor: expect[AMP125]
        ratio = torch.exp(logp - old_logp[index])
        yield ratio


def score(model, ids):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = model(ids)
    return out.logits.contiguous().log_softmax(-1)  # ampdoctor: expect[AMP125]


def train_step(model, batch, optimizer, scaler):
    with torch.autocast("cuda", dtype=torch.float16):
        logits = model(batch["input"])
    loss = F.cross_entropy(logits.view(-1, logits.size(-1)), batch["target"].view(-1))  # ampdoctor: expect[AMP125]
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()


if __name__ == "__main__":
    device_type = "cuda"
    ctx = nullcontext() if device_type == "cpu" else torch.autocast(device_type, dtype=torch.bfloat16)
