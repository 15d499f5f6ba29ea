# The checkpoint's tensors are cast to the model's bf16 before the assign=True load, so the parameters they become
# are bf16 whatever dtype the checkpoint was saved in.
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
    state = {k: v.to(torch.bfloat16) for k, v in state.items()}
    model.load_state_dict(state, assign=True)
    return model
