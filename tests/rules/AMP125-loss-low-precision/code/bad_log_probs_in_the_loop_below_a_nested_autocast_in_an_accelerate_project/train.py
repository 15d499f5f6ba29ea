# accelerate's mixed precision autocasts the forward of the models it prepares, not the loop around them: the frozen
# reference model, never prepared, returns bf16 logits from the loop's own autocast block, and the log-probabilities
# taken below that block run under no autocast and keep bf16.
import torch
import torch.nn.functional as F
from accelerate import Accelerator


def train(policy, reference, loader, optimizer):
    accelerator = Accelerator()
    policy, optimizer, loader = accelerator.prepare(policy, optimizer, loader)
    for ids, labels in loader:
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            ref_out = reference(ids)
        ref_logp = F.log_softmax(ref_out.logits, dim=-1)  # ampdoctor: expect[AMP125]
        logp = F.log_softmax(policy(ids).logits.float(), dim=-1)
        loss = (logp.exp() * (logp - ref_logp)).sum(-1).mean()
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
