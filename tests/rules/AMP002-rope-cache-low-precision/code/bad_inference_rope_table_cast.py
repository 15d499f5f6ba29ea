# The same bf16 frequencies in an inference script, which runs the model on them: what a table's dtype does to the
# angles happens at inference as in training (`scope: compute` keeps the warning wherever the model computes).
import torch


def generate(model, prompt_ids: torch.Tensor, head_dim: int) -> torch.Tensor:
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, head_dim, 2).float() / head_dim))
    inv_freq = inv_freq.to(torch.bfloat16)  # ampdoctor: expect[AMP002]
    positions = torch.arange(prompt_ids.shape[-1], device=prompt_ids.device).float()
    freqs = torch.outer(positions, inv_freq.float())
    return model(prompt_ids, cos=freqs.cos(), sin=freqs.sin())
