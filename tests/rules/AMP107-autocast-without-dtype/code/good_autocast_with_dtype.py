# The fix of datawhalechina/happy-llm PR #215: the autocast dtype is passed explicitly; a disabled autocast and
# CPU autocast (which defaults to bf16) need none.
import torch
from contextlib import nullcontext

dtype = "bfloat16"
device_type = "cuda"
ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
ctx = nullcontext() if device_type == "cpu" else torch.amp.autocast(device_type="cuda", dtype=ptdtype)


def train_step(model, x, y, optimizer):
    with torch.autocast(device_type, dtype=torch.bfloat16):
        loss = model(x, y)
    loss.backward()
    optimizer.step()


def rotary_angles(inv_freq, position_ids):
    with torch.autocast("cuda", enabled=False):
        return inv_freq[:, None] @ position_ids[None, :].float()


def cpu_eval(model, x):
    with torch.autocast("cpu"):
        return model(x)
