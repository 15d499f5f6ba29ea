# Two more ways the fp32 master-weight upcast of trainable parameters never reaches the module: the fp32 copy is made
# as a statement and dropped, and the loop runs over a selection of the parameters (a filter, a comprehension, a list
# bound to a name) and rebinds its variable.
import torch


def upcast_in_place(model: torch.nn.Module) -> None:
    for _, p in model.named_parameters():
        if p.requires_grad:
            p.data.float()  # ampdoctor: expect[AMP128]


def upcast_trainable(model: torch.nn.Module) -> None:
    trainable = [p for _, p in model.named_parameters() if p.requires_grad]
    for p in trainable:
        p = p.to(torch.float32)  # ampdoctor: expect[AMP128]


def upcast_filtered(model: torch.nn.Module) -> None:
    for p in filter(lambda q: q.requires_grad, model.parameters()):
        p.to(dtype=torch.float32)  # ampdoctor: expect[AMP128]
