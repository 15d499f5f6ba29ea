# The fix of OpenRLHF PR #634: the log-probabilities are taken of the logits cast to fp32.
import torch
from torch import nn


def log_probs_of(logits, tokens):
    return torch.log_softmax(logits.float(), dim=-1).gather(-1, tokens[..., None]).squeeze(-1)


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
