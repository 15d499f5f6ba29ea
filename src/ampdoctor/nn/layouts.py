"""Convert q/k projection weights between the two RoPE layouts.

A checkpoint trained with one layout and run with the other gives no error, only worse attention
(nanotron PR #214, GPT-NeoX #834). Rotating pairs (i, i + r/2) ("half") or (2i, 2i + 1) ("interleaved")
are the same rotation once the output channels of q_proj and k_proj are permuted per head.
"""

from __future__ import annotations

import torch

from ampdoctor.nn.rotary_math import Layout, check_layout


def layout_permutation(head_dim: int, rotary_dim: int | None, source: Layout, target: Layout) -> torch.Tensor:
    """Index ``perm`` such that ``channels_target = channels_source[perm]`` within one head."""
    check_layout(source)
    check_layout(target)
    rotary_dim = head_dim if rotary_dim is None else rotary_dim
    if rotary_dim % 2 or not 0 < rotary_dim <= head_dim:
        raise ValueError(f"rotary_dim must be even and in (0, head_dim={head_dim}], got {rotary_dim}")
    half = rotary_dim // 2
    if source == target:
        rot = torch.arange(rotary_dim)
    elif source == "half":  # target channel 2i <- i, 2i+1 <- i + r/2
        rot = torch.stack((torch.arange(half), torch.arange(half) + half), dim=-1).flatten()
    else:  # target channel i <- 2i, i + r/2 <- 2i + 1
        rot = torch.cat((torch.arange(0, rotary_dim, 2), torch.arange(1, rotary_dim, 2)))
    return torch.cat((rot, torch.arange(rotary_dim, head_dim)))


def convert_qk_layout(
    weight: torch.Tensor,
    num_heads: int,
    head_dim: int,
    *,
    source: Layout,
    target: Layout,
    rotary_dim: int | None = None,
) -> torch.Tensor:
    """Permute the output rows of a q_proj/k_proj weight ``[num_heads * head_dim, in]`` (or its bias
    ``[num_heads * head_dim]``) so a model using ``target`` layout computes the same attention as ``source``."""
    if weight.dim() not in (1, 2) or weight.shape[0] != num_heads * head_dim:
        raise ValueError(
            f"weight must have num_heads * head_dim = {num_heads * head_dim} rows (a q/k projection weight or bias), "
            f"got shape {tuple(weight.shape)}"
        )
    perm = layout_permutation(head_dim, rotary_dim, source, target).to(weight.device)
    per_head = weight.reshape(num_heads, head_dim, *weight.shape[1:])
    return per_head[:, perm].reshape(weight.shape).clone()
