# The fixes of pytorch/pytorch#137774 and huggingface/diffusers#9405: build integer positions in int64/fp32 and
# scale before any downcast; a small constant range (16 head indices) is exact in bf16.
import torch

WEIGHT_DTYPE = torch.bfloat16


def position_ids(seq_len, device):
    return torch.arange(seq_len, device=device, dtype=torch.long)


def embed_timesteps(timesteps, time_proj):
    scaled = timesteps.float() / 1000
    return time_proj(scaled.to(WEIGHT_DTYPE))


def alibi_slopes_16_heads():
    heads = torch.arange(1, 17, dtype=torch.bfloat16)
    return 2.0 ** (-8.0 * heads / 16)


def cast_embeddings(position_embeddings):
    return position_embeddings.to(WEIGHT_DTYPE)
