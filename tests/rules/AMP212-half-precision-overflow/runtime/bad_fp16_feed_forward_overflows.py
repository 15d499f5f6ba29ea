# A feed-forward block cast to fp16 whose output projection produces values beyond 65504, as T5's `wo` did
# (huggingface/transformers#5651): the projection's result is inf, the loss is NaN.
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 16)).half()
with torch.no_grad():
    model[2].weight.mul_(3e4)  # large trained weights: much of the output is beyond fp16's range
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
x, y = torch.randn(8, 16).half() * 4, torch.randn(8, 16)
out = model(x)  # ampdoctor: expect[AMP212]
loss = torch.nn.functional.mse_loss(out.float(), y)
loss.backward()
optimizer.step()
