# The fix of bad_fp32_batch_into_half_model.py: the batch is made in (or cast to) the model's dtype, or the model
# stays fp32 and runs under autocast.
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)

    def forward(self, x):
        return self.conv(x)


model = Net().to("cuda").to(torch.bfloat16)
noise = torch.randn(2, 3, 64, 64, device="cuda", dtype=torch.bfloat16)
out = model(noise)
image = torch.randn(1, 3, 64, 64).to("cuda").to(torch.bfloat16)
out = model(image)
ids = torch.arange(16)
fp32_model = Net().cuda()
with torch.autocast("cuda", dtype=torch.bfloat16):
    out = fp32_model(torch.randn(2, 3, 64, 64, device="cuda"))
