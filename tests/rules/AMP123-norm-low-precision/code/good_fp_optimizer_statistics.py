# An optimizer's second-moment statistic is a mean of squares followed by an rsqrt, but no normalisation layer of
# the model (modded-nanogpt's NorMuon, Adafactor). This file trains in bf16.
import torch

model = torch.nn.Linear(8, 8).to(torch.bfloat16)


def normuon_update(grad, momentum, v_buf, beta2=0.95, eps=1e-8):
    momentum.lerp_(grad, 0.05)
    update = momentum
    v_new = update.square().mean(dim=-1, keepdim=True)
    v_buf.lerp_(v_new.float(), 1 - beta2)
    return update * v_buf.clamp_min(eps).rsqrt()
