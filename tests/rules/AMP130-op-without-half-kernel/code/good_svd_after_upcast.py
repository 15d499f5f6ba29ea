# The fixed version: what the SVD decomposes is upcast first, and the factors go back to the weights' dtype.
import torch


def reduce_intruders(layer, delta, rank):
    dtype = layer.weight.dtype
    W_merged = (layer.weight.data + delta).float()
    U, S, V = torch.linalg.svd(W_merged, full_matrices=False)
    A = torch.linalg.qr(torch.randn(8, 8))[0]
    return (U[:, :rank] @ torch.diag(S[:rank])).to(dtype), V[:rank].to(dtype), A.to(torch.bfloat16)
