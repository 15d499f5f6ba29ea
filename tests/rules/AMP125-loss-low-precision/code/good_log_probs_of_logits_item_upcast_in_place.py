# The bf16 policy's output keeps its logits under a key; the key is rebound to an fp32 copy before any
# log-probabilities are taken, so every reader of output["logits"] below that line sees fp32.
import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM


def log_probs_from_logits(logits, labels):
    return torch.gather(F.log_softmax(logits, dim=-1), -1, labels.unsqueeze(-1)).squeeze(-1)


class Policy(torch.nn.Module):
    def __init__(self, path: str):
        super().__init__()
        self.model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.bfloat16)

    def forward(self, sequences, attention_mask, packed: bool = False):
        output = self.model(sequences, attention_mask=attention_mask)
        output["logits"] = output["logits"].to(torch.float32)
        if packed:
            return output["logits"].log_softmax(-1)
        return log_probs_from_logits(output["logits"][:, :-1, :], sequences[:, 1:])


class Critic(torch.nn.Module):
    def __init__(self, path: str):
        super().__init__()
        self.model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.bfloat16)

    def forward(self, sequences):
        out = self.model(sequences)
        out.logits = out.logits.float()
        return F.log_softmax(out.logits, dim=-1)
