# Casting one entry, or casting the entries to another dtype, still leaves the bf16 model with the checkpoint's
# dtypes after the assign=True load.
import torch
from safetensors.torch import load_file
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)


def load_one_entry_cast(path):
    with torch.device("meta"):
        model = Net()
    model = model.to(torch.bfloat16)
    state = load_file(path)
    state["fc.weight"] = state["fc.weight"].to(torch.bfloat16)  # the bias keeps the checkpoint's dtype
    model.load_state_dict(state, assign=True)  # ampdoctor: expect[AMP132]
    return model


def load_cast_to_fp32(path):
    with torch.device("meta"):
        model = Net()
    model = model.to(torch.bfloat16)
    state = load_file(path)
    for key in list(state):
        state[key] = state[key].float()
    model.load_state_dict(state, assign=True)  # ampdoctor: expect[AMP132]
    return model


def copy_from(other):
    with torch.device("meta"):
        model = Net()
    model = model.to(torch.bfloat16)
    state = other.state_dict()  # other's dtypes, whatever they are
    model.load_state_dict(state, assign=True)  # ampdoctor: expect[AMP132]
    return model
