# As good_half_log_softmax_inside_the_model, but the output layer's weight is computed each step from its parts (weight
# norm) and it has no bias: its matmul applies a layer's weight all the same, so the log_softmax of the gate inside
# the model, behind it, makes no log-probabilities of the loss.
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
head = nn.utils.parametrizations.weight_norm(nn.Linear(32, 128, bias=False))
model = nn.Sequential(nn.Embedding(128, 32), GatedMixer(), head).to(torch.bfloat16)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
tokens = torch.randint(0, 128, (4, 8))
logits = model(tokens).float()
loss = nn.functional.cross_entropy(logits.flatten(0, 1), tokens.flatten())
loss.backward()
optimizer.step()
