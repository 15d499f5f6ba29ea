# The fix of bad_upcast_discarded_or_over_selection.py: the fp32 copy is assigned to `.data`, so the module holds it;
# a selection whose loop keeps its fp32 copies uses them on purpose.
import torch


def upcast_in_place(model: torch.nn.Module) -> None:
    for _, p in model.named_parameters():
        if p.requires_grad:
            p.data = p.data.float()


def upcast_trainable(model: torch.nn.Module) -> None:
    trainable = [p for _, p in model.named_parameters() if p.requires_grad]
    for p in trainable:
        p.data = p.data.to(torch.float32)


def fp32_snapshot(model: torch.nn.Module) -> list[torch.Tensor]:
    snapshot = []
    for p in filter(lambda q: q.requires_grad, model.parameters()):
        p = p.detach().float()
        snapshot.append(p)
    return snapshot

