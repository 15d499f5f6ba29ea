# huggingface/diffusers PR #13503: the filter upcast bfloat16 before the FFT but let float16 through; torch.fft has no
# bf16 transform and fp16 only on CUDA for power-of-two sizes (into the experimental complex32), so fp16 fails or warns.
import torch


def low_pass(feat, keep):
    y = feat
    if y.dtype == torch.bfloat16:  # ampdoctor: expect[AMP130:warning]
        y = y.float()
    spec = torch.fft.rfft2(y)
    spec[..., keep:, :] = 0
    return torch.fft.irfft2(spec, s=y.shape[-2:]).to(feat.dtype)
