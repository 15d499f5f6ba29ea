# The table's key is "float16" as written, but the configurator's `exec` rebinds the script's globals from the
# command line (`--dtype=bfloat16`): the bf16 entry is one a run may pick, and then the dtype-less autocast is fp16.
import torch

dtype = "float16"
exec(open("configurator.py").read())
ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
model = torch.nn.Linear(16, 4).cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
for _ in range(100):
    with torch.cuda.amp.autocast():  # ampdoctor: expect[AMP107]
        loss = model(torch.randn(8, 16).cuda()).square().mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
