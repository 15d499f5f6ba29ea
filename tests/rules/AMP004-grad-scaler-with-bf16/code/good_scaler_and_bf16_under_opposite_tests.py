# `if x:` and `if not x:` are exclusive too.
import torch


def setup(args, model):
    if args.fsdp_native:
        model = model.to(torch.bfloat16)
    if not args.fsdp_native:
        scaler = torch.amp.GradScaler("cuda")
        return model, scaler
    return model, None
