# accelerate's mixed precision wraps the forward of the policy it prepares in its autocast and converts what it
# returns to fp32: the logits taken below the block are fp32 whichever autocast the loop enters around the call.
import torch
import torch.nn.functional as F
from accelerate import Accelerator


def train(policy, reference, loader, optimizer):
    accelerator = Accelerator(mixed_precision="bf16")
    policy, reference, optimizer, loader = accelerator.prepare(policy, reference, optimizer, loader)
    for ids, labels in loader:
        with accelerator.autocast():
            out = policy(ids)
        logp = F.log_softmax(out.logits, dim=-1)
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            ref_out = reference(ids)
        ref_logp = F.log_softmax(ref_out.logits, dim=-1)
        loss = (logp.exp() * (logp - ref_logp)).sum(-1).mean()
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
