# What the catalog recommends instead of retyping .grad (bghira/SimpleTuner#854): accumulate into a separate fp32
# buffer (Megatron's main_grad) or write the cast copy into the fp32 master parameter's .grad.
import torch


def accumulate_main_grads(model, main_grads):
    for name, p in model.named_parameters():
        if p.grad is None:
            continue
        main_grads[name] += p.grad.float()
        p.grad = None


def copy_to_master(model_params, master_params):
    for p, master in zip(model_params, master_params):
        master.grad = p.grad.detach().to(torch.float32)
        p.grad = p.grad.to(p.dtype)
