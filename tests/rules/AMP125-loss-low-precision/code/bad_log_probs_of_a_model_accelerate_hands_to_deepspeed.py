# Handed to DeepSpeed, accelerate leaves the precision to the engine and converts no output: the logits the loop's
# own autocast block returns are bf16, and the log-probabilities taken below it keep bf16.
import torch
import torch.nn.functional as F
from accelerate import Accelerator
from accelerate.utils import DeepSpeedPlugin


def train(policy, loader, optimizer):
    accelerator = Accelerator(mixed_precision="bf16", deepspeed_plugin=DeepSpeedPlugin(zero_stage=2))
    policy, optimizer, loader = accelerator.prepare(policy, optimizer, loader)
    for ids, labels in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = policy(ids)
        logp = F.log_softmax(out.logits, dim=-1)  # ampdoctor: expect[AMP125]
        loss = -logp.gather(-1, labels.unsqueeze(-1)).mean()
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()


def rollout_log_probs(policy, loader, accelerator):
    for ids, labels in loader:
        with accelerator.autocast():
            out = policy(ids)
        yield F.log_softmax(out.logits, dim=-1)  # ampdoctor: expect[AMP125]
