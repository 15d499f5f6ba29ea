# An iterative matrix inverse (Newton-Schulz) whose operands are named `key` and `value`: the "values" are computed
# from the "keys" themselves, so the product is no linear attention context summed over a sequence (a model file
# alone, where the note of a real context would be given).
import torch
from torch import nn


class LandmarkAttention(nn.Module):
    def iterative_inv(self, mat, n_iter=6):
        identity = torch.eye(mat.size(-1), device=mat.device)
        key = mat
        value = 1 / torch.max(torch.sum(key, dim=-2)) * key.transpose(-1, -2)
        for _ in range(n_iter):
            key_value = torch.matmul(key, value)
            value = torch.matmul(0.25 * value, 13 * identity - torch.matmul(key_value, 15 * identity - key_value))
        return value
