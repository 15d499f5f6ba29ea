# A quantizer's rotation state starts as the identity: rotation angles `theta` of all zeros and unit channel
# scales, made in the layer's half dtype. Zeros and ones are exact in any dtype, and no angle table is computed here.
import torch


def identity_rotation(in_features, pairs, dtype=torch.float16, device=None):
    theta = torch.zeros((pairs, in_features // 2), dtype=dtype)
    scales = torch.ones((1, in_features), dtype=dtype)
    if device is not None:
        theta = theta.to(device=device)
    return theta, scales
