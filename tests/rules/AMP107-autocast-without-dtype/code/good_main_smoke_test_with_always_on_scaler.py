# A smoke test under the __main__ guard pairs an always-on scaler (enabled=True) with CUDA autocast without a
# dtype: deliberate fp16 AMP. The bf16 above is an upcast around an op, not the run's precision.
import torch
import torch.nn.functional as F


def downsample(h):
    dtype = h.dtype
    if dtype == torch.bfloat16:
        h = h.to(torch.float32)
    return F.interpolate(h, scale_factor=0.5, mode="bicubic").to(dtype)


if __name__ == "__main__":
    model = torch.nn.Conv2d(4, 4, 3).cuda()
    optimizer = torch.optim.AdamW(model.parameters())
    scaler = torch.cuda.amp.GradScaler(enabled=True)
    for step in range(10):
        x = torch.randn(1, 4, 64, 64).cuda()
        with torch.cuda.amp.autocast(enabled=True):
            loss = downsample(model(x)).mean()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
