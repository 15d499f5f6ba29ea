# Builds the model and a control net; the script itself trains in fp32 (bf16 only names the checkpoint it saves).
import torch

from lm.controlnet import ControlNet
from lm.model import TinyLM


def main(loader):
    model, control = TinyLM(), ControlNet()
    optimizer = torch.optim.AdamW([*model.parameters(), *control.parameters()], lr=1e-4)
    for x in loader:
        loss = model(control(x)).square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    torch.save({k: v.to(torch.bfloat16) for k, v in model.state_dict().items()}, "model_bf16.pt")
