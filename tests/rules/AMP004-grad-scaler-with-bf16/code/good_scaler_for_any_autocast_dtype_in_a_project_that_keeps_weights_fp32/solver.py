# One ungated GradScaler serves fp16 and bf16 autocast alike. The model comes from the caller, but no file of this
# project casts a model to half or loads one in half (only the inputs are made half): the weights and their
# gradients stay fp32, so under bf16 the scaler only scales for nothing, a note.
import torch


def train(args, model, optimizer, loader):
    dtype = torch.float32
    if args.amp_dtype == "fp16":
        dtype = torch.float16
    elif args.amp_dtype == "bf16":
        dtype = torch.bfloat16
    scaler = torch.cuda.amp.GradScaler()  # ampdoctor: expect[AMP004:info]
    for batch in loader:
        with torch.autocast(device_type="cuda", dtype=dtype):
            loss = model(batch).float().mean()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
