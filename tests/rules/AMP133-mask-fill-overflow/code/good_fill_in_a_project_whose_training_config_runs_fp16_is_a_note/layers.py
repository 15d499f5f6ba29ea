# The project trains in fp16 (ds_config.json): a tensor this helper is handed may be fp16, where -1e9 overflows.
import torch


def masked_scores(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return scores.masked_fill(mask, -1e9)  # ampdoctor: expect[AMP133:info]
