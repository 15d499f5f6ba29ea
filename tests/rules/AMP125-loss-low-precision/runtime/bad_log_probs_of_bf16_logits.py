# OpenRLHF PR #634: a policy-gradient loss from the log-probabilities of a bf16 model. The loss is fp32 (the
# advantages are fp32), but the log-probabilities were taken in bf16: the ratio exp(new - old) is mostly rounding.
import torch
from torch import nn


def log_probs_of(logits, tokens):
    return torch.log_softmax(logits, dim=-1).gather(-1, tokens[..., None]).squeeze(-1)  # ampdoctor: expect[AMP125]


torch.manual_seed(0)
policy = nn.Sequential(nn.Embedding(128, 32), nn.Linear(32, 128)).to(torch.bfloat16)
optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-3)
tokens = torch.randint(0, 128, (4, 8))
with torch.no_grad():
    old = log_probs_of(policy(tokens), tokens)
advantages = torch.randn(4, 8)
ratio = (log_probs_of(policy(tokens), tokens) - old).exp()
loss = -(ratio * advantages).mean()
loss.backward()
optimizer.step()
