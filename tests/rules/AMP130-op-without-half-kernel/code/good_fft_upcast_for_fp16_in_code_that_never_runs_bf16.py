# An FFT convolution that upcasts fp16 inputs, in code whose only half precision is autocast's default (fp16):
# nothing here or in its project asks for bf16, so no bf16 input reaches the transform.
import torch


def fft_conv(u, k):
    half = False
    if u.dtype == torch.float16:
        half = True
        u = u.to(torch.float32)
    y = torch.fft.irfft(torch.fft.rfft(u, n=2 * u.shape[-1]) * torch.fft.rfft(k, n=2 * u.shape[-1]), n=2 * u.shape[-1])
    y = y[..., : u.shape[-1]]
    return y.half() if half else y


def train_step(model, batch, optimizer, scaler):
    with torch.cuda.amp.autocast():
        loss = model(batch).mean()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
