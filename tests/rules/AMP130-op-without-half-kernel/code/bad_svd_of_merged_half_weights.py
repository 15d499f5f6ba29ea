# huggingface/peft PR #3410: the base weight is upcast for a half model, the merged weight that the SVD decomposes
# is not; "linalg_svd_cpu" is not implemented for 'BFloat16' (and cuSOLVER has no half SVD either).
import torch


def reduce_intruders(layer, delta, rank):
    W = layer.weight.data
    if W.dtype in (torch.float16, torch.bfloat16):
        W = W.float()
    W_merged = layer.weight.data + delta
    U, S, V = torch.linalg.svd(W_merged, full_matrices=False)  # ampdoctor: expect[AMP130:warning]
    return U[:, :rank] @ torch.diag(S[:rank]), V[:rank], W
