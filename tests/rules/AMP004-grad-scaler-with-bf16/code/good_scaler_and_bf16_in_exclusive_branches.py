# bf16 and the GradScaler live on opposite sides of one switch: no run has both.
import torch


def setup(args, model):
    if args.mixed == "bf16":
        model = model.to(torch.bfloat16)
        scaler = None
    else:
        scaler = torch.amp.GradScaler("cuda")
    if not args.use_scaler:
        return model, None
    if args.use_scaler:
        return model, scaler
