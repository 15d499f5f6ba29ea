# The same round trip that forgets the parameter on the way back: its .grad goes to fp16 while the parameter stays
# fp32, and the next backward cannot accumulate into it.
import torch


class Fp16GradOnly(torch.optim.Optimizer):
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.data.dtype == torch.float16:
                    p.data = p.data.float()
                    p.grad = p.grad.float()
                p.data.add_(p.grad, alpha=-group["lr"])
                p.grad = p.grad.half()  # ampdoctor: expect[AMP003:warning]
