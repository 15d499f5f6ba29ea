import torch

from fp16_util import MixedPrecisionTrainer
from layers import Block

model = Block(64).cuda().half()
trainer = MixedPrecisionTrainer(model)
for _ in range(10):
    x = torch.randn(8, 64, device="cuda", dtype=torch.float16, requires_grad=True)
    trainer.backward(model(x).float().pow(2).mean())
    trainer.step()
