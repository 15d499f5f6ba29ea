# A model built on the meta device in bf16 and loaded with assign=True. Where the weights are downloaded from a hub,
# their dtype is the one they were published in, which the code does not show: a note. Where they are the
# project's own training output (saved in fp32 by an fp32-master run), the model turns fp32: a warning.
import os

import torch
from huggingface_hub import hf_hub_download
from safetensors.torch import load_file
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)


def from_hub(name_or_dir, filename="model.safetensors"):
    if os.path.isdir(name_or_dir):
        path = os.path.join(name_or_dir, filename)
    else:
        path = hf_hub_download(repo_id=name_or_dir, filename=filename)
    state = load_file(path, device="cuda")
    with torch.device("meta"):
        model = Net().to(torch.bfloat16)
    model.load_state_dict(state, strict=False, assign=True)  # ampdoctor: expect[AMP132:info]
    return model


def from_training_run(run_dir):
    state = torch.load(os.path.join(run_dir, "last.pt"), map_location="cpu")
    with torch.device("meta"):
        model = Net().to(torch.bfloat16)
    model.load_state_dict(state, assign=True)  # ampdoctor: expect[AMP132:warning]
    return model
