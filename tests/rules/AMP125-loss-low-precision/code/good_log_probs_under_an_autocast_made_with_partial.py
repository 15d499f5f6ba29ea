# The trainer casts the QLoRA model to bf16 and enters autocast around the step through a factory made with
# functools.partial: the log-probabilities are taken inside it, where log_softmax runs in fp32.
from functools import partial

import torch
import torch.nn.functional as F


class PreferenceTrainer:
    def __init__(self, model):
        self.model = model.to(torch.bfloat16)
        self.step_context = partial(torch.autocast, device_type="cuda", dtype=torch.bfloat16)

    def sequence_log_probs(self, input_ids, labels):
        logits = self.model(input_ids).logits
        return torch.gather(F.log_softmax(logits, dim=-1), -1, labels.unsqueeze(-1)).squeeze(-1)

    def compute_loss(self, batch):
        with self.step_context():
            chosen = self.sequence_log_probs(batch["chosen"], batch["chosen_labels"])
            rejected = self.sequence_log_probs(batch["rejected"], batch["rejected_labels"])
        return -F.logsigmoid(chosen.sum(-1) - rejected.sum(-1)).mean()
