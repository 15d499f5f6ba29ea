# huggingface/diffusers PR #13922: positions starting at 65536 under bf16 autocast collapse in blocks of 512. Here
# the angles are an einsum that contracts an index (a batched matmul, on autocast's lower-precision list) in a
# script that trains with accelerate's bf16 mixed precision.
import torch
from accelerate import Accelerator


def rope(position_ids, inv_freq):
    inv = inv_freq[None, :, None].expand(position_ids.shape[0], -1, 1).float()
    pos = position_ids[:, None, :].float()
    angles = torch.einsum("bdj,bjn->bnd", inv, pos)  # ampdoctor: expect[AMP101]
    return torch.cos(angles), torch.sin(angles)


accelerator = Accelerator(mixed_precision="bf16")
