# torch.autocast without a dtype takes the dtype autocast is set to where it is made: inside the bf16 block (or a
# function an autocast decorates), that is bf16, so both inner blocks run in bf16.
import torch


def train_step(model, x, y, optimizer):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        h = model.encoder(x)
        with torch.autocast(device_type="cuda"):
            loss = model.head(h, y)
    loss.backward()
    optimizer.step()


@torch.autocast("cuda", dtype=torch.bfloat16)
def evaluate(model, x):
    with torch.autocast("cuda"):
        return model(x)
