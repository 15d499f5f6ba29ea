# The factory made with functools.partial asks autocast for float32, which keeps its region in the weights' dtype
# (CUDA autocast turns itself off for it): the bf16 model's log-probabilities are taken in bf16.
from functools import partial

import torch
import torch.nn.functional as F


class PreferenceTrainer:
    def __init__(self, model):
        self.model = model.to(torch.bfloat16)
        self.step_context = partial(torch.autocast, "cuda", torch.float32)

    def sequence_log_probs(self, input_ids, labels):
        logits = self.model(input_ids).logits
        return torch.gather(F.log_softmax(logits, dim=-1), -1, labels.unsqueeze(-1)).squeeze(-1)  # ampdoctor: expect[AMP125]

    def compute_loss(self, batch):
        with self.step_context():
            chosen = self.sequence_log_probs(batch["chosen"], batch["chosen_labels"])
            rejected = self.sequence_log_probs(batch["rejected"], batch["rejected_labels"])
        return -F.logsigmoid(chosen.sum(-1) - rejected.sum(-1)).mean()
