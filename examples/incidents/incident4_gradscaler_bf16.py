"""Incident 4 (h2oai/h2o-llmstudio#628): a GradScaler built unconditionally for "mixed precision"
while the backbone is bf16. On CUDA `scaler.step` fails with
`"_amp_foreach_non_finite_check_and_unscale_cuda" not implemented for 'BFloat16'`; on CPU the same
code runs silently, and the audit reports it anyway.

Run: python examples/incidents/incident4_gradscaler_bf16.py
"""

import torch
import torch.nn as nn

torch.manual_seed(0)
MIXED_PRECISION = True
BACKBONE_DTYPE = torch.bfloat16


def main() -> None:
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to(BACKBONE_DTYPE)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    scaler = torch.amp.GradScaler("cpu")  # always built: the bug (fix: enabled=dtype == torch.float16)
    x = torch.randn(8, 16, dtype=BACKBONE_DTYPE)
    target = torch.randint(0, 4, (8,))
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=MIXED_PRECISION):
        logits = model(x)
        loss = nn.functional.cross_entropy(logits, target)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()


if __name__ == "__main__":
    main()
