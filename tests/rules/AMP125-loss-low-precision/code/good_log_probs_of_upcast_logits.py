# The fix of OpenRLHF PR #634: the logits of the bf16 policy are upcast before their log-probabilities are taken.
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
        return log_probs_from_logits(output["logits"][:, :-1, :].float(), sequences[:, 1:])
