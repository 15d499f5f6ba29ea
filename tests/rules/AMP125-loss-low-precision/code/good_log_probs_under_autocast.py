# The same bf16 policy run under autocast: log_softmax is on autocast's fp32 list, so the log-probabilities are fp32.
import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM


class Policy(torch.nn.Module):
    def __init__(self, path: str):
        super().__init__()
        self.model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.bfloat16)

    def forward(self, sequences):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            output = self.model(sequences)
            return F.log_softmax(output.logits, dim=-1)
