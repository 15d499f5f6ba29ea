# Every tensor the assign=True load hands the bf16 model is bf16 already: the entries are cast one by one in a loop,
# the dict is filled with casts from empty, or it is the state dict of a model cast to bf16.
import torch
from safetensors.torch import load_file
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)


def load_cast_in_a_loop(path):
    with torch.device("meta"):
        model = Net()
    model = model.to(torch.bfloat16)
    state = load_file(path)
    for key in list(state):
        state[key] = state[key].to(torch.bfloat16)
    model.load_state_dict(state, assign=True)
    return model


def load_renamed(path, names):
    with torch.device("meta"):
        model = Net()
    model = model.to(torch.bfloat16)
    loaded = load_file(path)
    state = {}
    for old, new in names.items():
        state[new] = loaded[old].to(dtype=torch.bfloat16)
    model.load_state_dict(state, assign=True)
    return model


def copy_from(other):
    with torch.device("meta"):
        model = Net()
    model = model.to(torch.bfloat16)
    state = other.to(torch.bfloat16).state_dict()
    model.load_state_dict(state, assign=True)
    return model
