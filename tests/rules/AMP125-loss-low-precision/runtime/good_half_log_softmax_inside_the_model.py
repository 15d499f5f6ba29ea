# A bf16 model that takes a log_softmax inside itself (gates mixed in log space), behind its output layer; the loss
# is of the logits cast to fp32. That inner log_softmax makes no log-probabilities of the loss: the output layer's
# matmul lies between them, so it is the model's own arithmetic, not the loss's precision.
import torch
from torch import nn


class GatedMixer(nn.Module):
    def __init__(self, dim=32, experts=4):
        super().__init__()
        self.gate = nn.Linear(dim, experts)
        self.experts = nn.Linear(dim, dim * experts)
        self.n = experts

    def forward(self, x):
        log_gates = torch.log_softmax(self.gate(x), dim=-1)
        outs = self.experts(x).unflatten(-1, (self.n, -1))
        return (log_gates.exp()[..., None] * outs).sum(-2)


torch.manual_seed(0)
model = nn.Sequential(nn.Embedding(128, 32), GatedMixer(), nn.Linear(32, 128)).to(torch.bfloat16)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
tokens = torch.randint(0, 128, (4, 8))
logits = model(tokens).float()
loss = nn.functional.cross_entropy(logits.flatten(0, 1), tokens.flatten())
loss.backward()
optimizer.step()
