# The fix: cast after the load (or load without assign=True, which copies into the model's own dtypes).
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
    model.load_state_dict(torch.load(path, mmap=True), assign=True)
    model = model.to(torch.bfloat16)
    return model


def load_by_copy(path):
    model = Net().to(torch.bfloat16)
    model.load_state_dict(torch.load(path))  # copies into the bf16 parameters
    return model


def load_fp32(path):
    with torch.device("meta"):
        model = Net()
    model.load_state_dict(torch.load(path), assign=True)  # no half dtype intended
    return model


def convert(path):
    model = Net().to(torch.bfloat16)
    state = model.state_dict()
    with torch.device("meta"):
        model = Net()  # a new model: the bf16 cast above was of another object
    model.load_state_dict(state, assign=True)
    return model
