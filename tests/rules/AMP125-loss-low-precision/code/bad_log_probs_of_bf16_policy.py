# OpenRLHF PR #634: the policy model is loaded in bf16 and run without autocast; the log-probabilities of its logits
# are taken in bf16, so the PPO ratio exp(new - old) of two such numbers is mostly rounding.
import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM


def log_probs_from_logits(logits, labels):
    return torch.gather(F.log_softmax(logits, dim=-1), -1, labels.unsqueeze(-1)).squeeze(-1)


class Policy(torch.nn.Module):
    def __init__(self, path: str, bf16: bool = True):
        super().__init__()
        self.model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.bfloat16 if bf16 else "auto")

    def forward(self, sequences, attention_mask):
        output = self.model(sequences, attention_mask=attention_mask)
        return log_probs_from_logits(output["logits"][:, :-1, :], sequences[:, 1:])  # ampdoctor: expect[AMP125]
