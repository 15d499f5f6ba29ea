# llm-foundry PR #916 / pytorch #108381: a model built on the meta device and cast to bf16, then loaded with
# assign=True: the parameters become the checkpoint's tensors, so an fp32 checkpoint (FSDP saves fp32) makes
# the model fp32 again, with twice the memory and no bf16 anywhere.
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)


def load(path):
    with torch.device("meta"):
        model = Net()
    model = model.to(torch.bfloat16)
    state = torch.load(path, mmap=True)
    model.load_state_dict(state, assign=True)  # ampdoctor: expect[AMP132]
    return model


def load_with_default_dtype(path):
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("meta"):
        model = Net()
    model.load_state_dict(torch.load(path), assign=True)  # ampdoctor: expect[AMP132]
    return model


def load_cast_to_another_dtype(path):
    with torch.device("meta"):
        model = Net()
    model = model.to(torch.bfloat16)
    state = {k: v.to(torch.float32) for k, v in torch.load(path).items()}  # cast, but not to the model's bf16
    model.load_state_dict(state, assign=True)  # ampdoctor: expect[AMP132]
    return model
