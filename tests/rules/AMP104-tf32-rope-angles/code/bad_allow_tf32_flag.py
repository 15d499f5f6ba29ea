# The same TF32 truncation (huggingface/transformers#48428) switched on through the backend flag.
import torch

torch.backends.cuda.matmul.allow_tf32 = True


def rope_angles(position_ids, inv_freq):
    return torch.matmul(position_ids[:, :, None].float(), inv_freq[None, None, :])  # ampdoctor: expect[AMP104]
