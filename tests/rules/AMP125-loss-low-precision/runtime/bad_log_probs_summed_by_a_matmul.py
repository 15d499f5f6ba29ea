# The policy-gradient loss of bf16 log-probabilities, weighted by the advantages with a matmul instead of a
# product and a mean: a matmul that applies no layer's weight is part of the loss, and the walk back from the loss
# goes through it to the half log_softmax.
import torch
from torch import nn

torch.manual_seed(0)
policy = nn.Sequential(nn.Embedding(128, 32), nn.Linear(32, 128)).to(torch.bfloat16)
optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-3)
tokens = torch.randint(0, 128, (32,))
log_probs = torch.log_softmax(policy(tokens), dim=-1).gather(-1, tokens[:, None]).squeeze(-1)  # ampdoctor: expect[AMP125]
advantages = torch.randn(32)
loss = -(log_probs.float()[None, :] @ advantages[:, None]).squeeze() / 32
loss.backward()
optimizer.step()
