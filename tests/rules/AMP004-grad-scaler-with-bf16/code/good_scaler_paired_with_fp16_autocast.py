# A scaler paired with an explicit fp16 autocast in the function that creates it is deliberate fp16 AMP: the bf16
# elsewhere in the file is an upcast for an op, not the run's precision.
import torch
import torch.nn.functional as F


class UNet(torch.nn.Module):
    def forward(self, x):
        # an upcast for an op bf16 lacks, not the training precision
        if x.dtype == torch.bfloat16:
            x = x.float()
        return F.interpolate(x, scale_factor=2.0)


def main():
    model = UNet().cuda()
    opt = torch.optim.AdamW(model.parameters())
    scaler = torch.amp.GradScaler("cuda")
    for batch in range(10):
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(batch).mean()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
