# The model is cast to bf16 but its output head is kept in fp32, so the logits and the loss are fp32.
import torch
import torch.nn.functional as F


class GPT(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Linear(16, 16)
        self.lm_head = torch.nn.Linear(16, 100)

    def forward(self, x, targets):
        logits = self.lm_head(self.body(x).float())
        return F.cross_entropy(logits.view(-1, 100), targets.view(-1))


model = GPT().to(torch.bfloat16)
model.lm_head.float()
