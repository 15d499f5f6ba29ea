# EleutherAI/gpt-neox#1305: the run is meant to be pure bf16 (DeepSpeed's bf16 engine), but the model code derives
# its own dtype from an unset `precision` and builds fp32 weights. Audited against the intended policy, the
# trainable parameters are in another dtype than the policy says.
# ampdoctor: policy=bf16-true
# ampdoctor: expect-anywhere[AMP001]
import torch

PRECISION = None  # "precision" missing from the config
params_dtype = torch.bfloat16 if PRECISION == "bfloat16" else torch.float32

model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).to(params_dtype)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(4, 8, dtype=params_dtype)
loss = model(x).float().pow(2).mean()
loss.backward()
optimizer.step()
