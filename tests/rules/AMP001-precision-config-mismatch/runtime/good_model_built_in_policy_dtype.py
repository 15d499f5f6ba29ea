# The fix of EleutherAI/gpt-neox#1305 ("precision": "bfloat16"): the weights are built in the dtype the policy says.
# ampdoctor: policy=bf16-true
import torch

PRECISION = "bfloat16"
params_dtype = torch.bfloat16 if PRECISION == "bfloat16" else torch.float32

model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).to(params_dtype)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(4, 8, dtype=params_dtype)
loss = model(x).float().pow(2).mean()
loss.backward()
optimizer.step()
