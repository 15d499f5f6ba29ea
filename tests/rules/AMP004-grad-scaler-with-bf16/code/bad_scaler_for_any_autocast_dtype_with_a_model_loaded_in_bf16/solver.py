# The same solver, and the model it is given is loaded in bf16 by a module of the project: its gradients are
# bf16, and `unscale_` fails on them, an error.
import torch


def train(args, model, optimizer, loader):
    dtype = torch.float32
    if args.amp_dtype == "fp16":
        dtype = torch.float16
    elif args.amp_dtype == "bf16":
        dtype = torch.bfloat16
    scaler = torch.cuda.amp.GradScaler()  # ampdoctor: expect[AMP004:error]
    for batch in loader:
        with torch.autocast(device_type="cuda", dtype=dtype):
            loss = model(batch).float().mean()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
