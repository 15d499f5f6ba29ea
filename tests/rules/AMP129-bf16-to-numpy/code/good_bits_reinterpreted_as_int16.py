# Writing bf16 weights to a binary file: `.view(torch.int16)` reinterprets the bits losslessly, and NumPy has int16.
import torch


def write_tensor(t, f):
    bits = t.to(torch.bfloat16).view(torch.int16)
    f.write(bits.cpu().numpy().tobytes())
