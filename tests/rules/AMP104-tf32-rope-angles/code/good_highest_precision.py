# A matmul for the angles is exact enough when fp32 matmuls stay fp32 ("highest", the default): the near miss of
# huggingface/transformers#48428.
import torch

torch.set_float32_matmul_precision("highest")


def rope_angles(inv_freq, position_ids):
    return (inv_freq[None, :, None].float() @ position_ids[:, None, :].float()).transpose(1, 2)
