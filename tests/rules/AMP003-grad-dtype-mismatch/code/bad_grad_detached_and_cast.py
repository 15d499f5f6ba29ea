# The same retyping spelled without `.data` (bghira/SimpleTuner#854): the parameter stays bf16, its .grad is fp32.
import torch


def upcast_gradients(model):
    for p in model.parameters():
        if p.grad is not None and p.dtype == torch.bfloat16:
            p.grad = p.grad.detach().float()  # ampdoctor: expect[AMP003:warning]
