# An optimizer that steps fp16 parameters in fp32: it upcasts a parameter and its gradient together, updates, and
# casts both back to fp16, so the parameter and its .grad never differ in dtype.
import torch


class Fp16RoundTrip(torch.optim.Optimizer):
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                half = p.data.dtype == torch.float16
                if half:
                    p.data = p.data.float()
                    p.grad = p.grad.float()
                p.data.add_(p.grad, alpha=-group["lr"])
                if half:
                    p.data = p.data.half()
                    p.grad = p.grad.half()
