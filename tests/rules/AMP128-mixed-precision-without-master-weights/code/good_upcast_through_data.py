# The upcast reaches the module: through `.data`, or the fp32 copy is stored back; a rebinding that is read
# afterwards is a local fp32 view used on purpose.
import torch


def upcast_trainable(model: torch.nn.Module) -> None:
    for _, p in model.named_parameters():
        if p.requires_grad and p.dtype != torch.float32:
            p.data = p.data.to(torch.float32)


def fp32_copies(model: torch.nn.Module) -> list[torch.Tensor]:
    copies = []
    for p in model.parameters():
        p = p.detach().float()
        copies.append(p)
    return copies


def norms(model: torch.nn.Module) -> list[float]:
    out = []
    for p in model.parameters():
        p = p.float()
        out.append(p.norm().item())
    return out


def downcast_view(model: torch.nn.Module) -> None:
    for p in model.parameters():
        p = p.to(torch.bfloat16)
