# An fp32 master-weight upcast written as a rebinding of the loop variable: `p.to(...)` returns a new tensor, the
# name now points at it, and the module keeps its bf16 parameters. The optimizer then steps bf16 weights.
import torch


def upcast_trainable(model: torch.nn.Module) -> list[str]:
    upcast = []
    for name, p in model.named_parameters():
        if p.requires_grad and p.dtype != torch.float32:
            upcast.append(name)
            p = p.to(torch.float32)  # ampdoctor: expect[AMP128]
    return upcast


def upcast_all(model: torch.nn.Module) -> None:
    for p in model.parameters():
        p = p.float()  # ampdoctor: expect[AMP128]
