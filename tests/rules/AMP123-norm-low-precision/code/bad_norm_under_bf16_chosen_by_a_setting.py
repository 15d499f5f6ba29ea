# A training file that picks its precision from a setting: `cfg.dtype == "bf16"` compares a configured name, not a
# tensor's dtype, so the bf16 autocast it enters is this file's precision, and the RMSNorm's variance runs in it:
# `x * x` is a `mul`, which autocast runs in its input's dtype (a `pow` it would run in fp32 on CUDA).
import torch


class RMSNorm(torch.nn.Module):
    def forward(self, x):
        variance = (x * x).mean(-1, keepdim=True)  # ampdoctor: expect[AMP123]
        return x * torch.rsqrt(variance + 1e-6)


def main(cfg, batch):
    if cfg.dtype == "bf16":
        ctx = torch.autocast("cuda", dtype=torch.bfloat16)
    else:
        ctx = torch.autocast("cuda", enabled=False)
    with ctx:
        return RMSNorm()(batch)
