"""A bf16 training step written the way ampdoctor recommends: fp32 master weights under bf16 autocast, fp32
RoPE tables, a scaler that only exists for fp16. `ampdoctor lint` reports nothing here."""

import argparse

import torch
import torch.nn.functional as F


class Rotary(torch.nn.Module):
    def __init__(self, dim: int, base: float = 10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor):
        with torch.autocast(device_type=x.device.type, enabled=False):
            freqs = position_ids[..., None].float() * self.inv_freq.float()
            emb = torch.cat((freqs, freqs), dim=-1)
            cos, sin = emb.cos(), emb.sin()
        return cos.to(x.dtype), sin.to(x.dtype)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--precision", choices=["bf16", "fp16"], default="bf16")
    args = parser.parse_args()
    amp_dtype = torch.bfloat16 if args.precision == "bf16" else torch.float16
    model = torch.nn.Linear(64, 64).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    scaler = torch.amp.GradScaler("cuda", enabled=amp_dtype == torch.float16)
    for _ in range(10):
        x = torch.randn(8, 64, device="cuda")
        with torch.autocast("cuda", dtype=amp_dtype):
            logits = model(x)
        loss = F.cross_entropy(logits.float(), torch.zeros(8, dtype=torch.long, device="cuda"))
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        print(loss.detach().float().cpu().numpy())


if __name__ == "__main__":
    main()
