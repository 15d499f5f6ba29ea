# The same load in an inference script, which then runs the model: an fp32 checkpoint makes it an fp32 model where
# fp16 was asked (twice the memory, another dtype than the caller's inputs).
import torch
from torch import nn


class Projector(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, 32)


def predict(source: str, features: torch.Tensor) -> torch.Tensor:
    torch.set_default_dtype(torch.float16)
    with torch.device("meta"):
        model = Projector()
    state = {k.replace("proj.", "fc."): v for k, v in torch.load(source).items()}
    model.load_state_dict(state, assign=True)  # ampdoctor: expect[AMP132]
    return model(features.half())
