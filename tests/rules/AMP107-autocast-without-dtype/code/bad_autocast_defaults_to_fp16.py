# datawhalechina/happy-llm PR #195 / PR #215: the config says bf16, but autocast is entered without `dtype=`, so
# on CUDA it runs in fp16 (`torch.get_autocast_dtype("cuda")`), with no scaler: NaN losses.
import torch
from contextlib import nullcontext

dtype = "bfloat16"
device_type = "cuda"
ctx = nullcontext() if device_type == "cpu" else torch.cuda.amp.autocast()  # ampdoctor: expect[AMP107]


def train_step(model, x, y, optimizer):
    with torch.autocast(device_type):  # ampdoctor: expect[AMP107]
        loss = model(x, y)
    loss.backward()
    optimizer.step()
