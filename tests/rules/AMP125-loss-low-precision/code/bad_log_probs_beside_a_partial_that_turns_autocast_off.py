# A factory made with functools.partial that turns autocast off enters none: the bf16 model's log-probabilities are
# taken in bf16.
from functools import partial

import torch
import torch.nn.functional as F


class PreferenceTrainer:
    def __init__(self, model):
        self.model = model.to(torch.bfloat16)
        self.no_autocast = partial(torch.autocast, device_type="cuda", enabled=False)

    def sequence_log_probs(self, input_ids, labels):
        logits = self.model(input_ids).logits
        return torch.gather(F.log_softmax(logits, dim=-1), -1, labels.unsqueeze(-1)).squeeze(-1)  # ampdoctor: expect[AMP125]
