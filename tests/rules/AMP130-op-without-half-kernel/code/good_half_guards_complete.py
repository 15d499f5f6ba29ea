# The fixed shapes of the three guards: every non-fp32 dtype is upcast before the FFT and the solve, on every device,
# and the merge guards all name both half dtypes. A float16-only clamp is no upcast (bf16 has fp32's range), and an
# op inside the guard runs only for the dtype the guard names (and a guard with no device condition is no CPU
# workaround to compare); an operand upcast in the call itself needs no guard.
import torch


def low_pass(feat, keep):
    y = feat
    if y.dtype != torch.float32:
        y = y.float()
    spec = torch.fft.rfft2(y)
    spec[..., keep:, :] = 0
    return torch.fft.irfft2(spec, s=y.shape[-2:]).to(feat.dtype)


def cayley(skew):
    dtype = skew.dtype
    if dtype in (torch.float16, torch.bfloat16):
        skew = skew.float()
    eye = torch.eye(skew.shape[0], device=skew.device, dtype=skew.dtype)
    return torch.linalg.solve(eye - skew, eye + skew).to(dtype)


def delta(a, b, scale):
    up = a.device.type == "cpu" and a.dtype in (torch.float16, torch.bfloat16)
    if up:
        a = a.float()
        b = b.float()
    out = (b @ a) * scale
    if out.dtype == torch.float16:
        out = out.clamp(-65504, 65504)
    return out


def spectrum_bf16(x):
    if x.dtype == torch.bfloat16:
        x = x.float()
        return torch.fft.fft(x)
    return x


def unmerge(block, weight):
    on_cpu = block.device.type == "cpu" and block.dtype in (torch.float16, torch.bfloat16)
    if on_cpu:
        block = block.float()
    eye = torch.eye(block.shape[-1], device=block.device)
    return weight @ torch.linalg.inv(eye + block.float()).to(weight.dtype)
