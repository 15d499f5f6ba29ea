# A weight converter: a model made fp16 by the default dtype receives the converted tensors with assign=True and is
# saved at once. It is never run here, so the checkpoint's dtypes make a larger file, not a model computing in
# another dtype than asked (conversion code: a note, `scope: compute`).
import torch
from torch import nn


class Projector(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, 32)


def convert(source: str, out: str) -> None:
    torch.set_default_dtype(torch.float16)
    with torch.device("meta"):
        model = Projector()
    state = {k.replace("proj.", "fc."): v for k, v in torch.load(source).items()}
    model.load_state_dict(state, assign=True)
    torch.save(model.state_dict(), out)
