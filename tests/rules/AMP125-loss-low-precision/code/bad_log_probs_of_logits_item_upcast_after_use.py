# The key is rebound to an fp32 copy only after the log-probabilities were taken (for a later caller): the
# log-probabilities themselves come from the bf16 logits.
import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM


class Policy(torch.nn.Module):
    def __init__(self, path: str):
        super().__init__()
        self.model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.bfloat16)

    def forward(self, sequences, attention_mask):
        output = self.model(sequences, attention_mask=attention_mask)
        log_probs = F.log_softmax(output["logits"], dim=-1)  # ampdoctor: expect[AMP125]
        output["logits"] = output["logits"].float()
        return log_probs, output
