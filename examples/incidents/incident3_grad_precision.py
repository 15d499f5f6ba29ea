"""Incident 3 (bghira/SimpleTuner#854): `--gradient_precision=fp32` with gradient accumulation.

The model is bf16 (moved to the device "in torch.bfloat16"); after every backward the trainer ran
`param.grad.data = param.grad.data.to(torch.float32)`. The next micro-batch's backward then
accumulates a bf16 gradient into an fp32 `.grad` of a bf16 parameter; the report said "Expected
BFloat16, got Float". On torch 2.13 the accumulation runs (the `.grad` stays fp32) and the SGD
step here takes the mixed pair, so nothing fails: the audit reports it from the `.grad` dtypes as a
warning (the step of AdamW or another Adam-family optimizer would raise on the pair: an error).

Run: python examples/incidents/incident3_grad_precision.py
"""

import torch
import torch.nn as nn

torch.manual_seed(0)
GRADIENT_ACCUMULATION_STEPS = 2
GRADIENT_PRECISION = "fp32"


def main() -> None:
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4)).to(torch.bfloat16)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    for _ in range(GRADIENT_ACCUMULATION_STEPS):
        x = torch.randn(8, 16, dtype=torch.bfloat16)
        target = torch.randn(8, 4)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = model(x)
        loss = nn.functional.mse_loss(out.float(), target)
        loss.backward()
        if GRADIENT_PRECISION == "fp32":
            for param in model.parameters():
                param.grad.data = param.grad.data.to(torch.float32)
    optimizer.step()
    optimizer.zero_grad()


if __name__ == "__main__":
    main()
