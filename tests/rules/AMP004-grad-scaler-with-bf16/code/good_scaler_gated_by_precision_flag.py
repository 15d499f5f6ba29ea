# The scaler is gated by a flag derived from the precision argument; its sign is not readable here ("amp" is
# whatever the project calls it), so no finding states a guess as a fact.
import torch


def train(args, model, loader, optimizer):
    autocast_dtype = torch.bfloat16 if args.precision == "amp_bf16" else torch.float16
    need_scaler = args.precision == args.amp_mode
    scaler = torch.amp.GradScaler("cuda", enabled=need_scaler)
    for batch in loader:
        with torch.autocast("cuda", dtype=autocast_dtype):
            loss = model(batch)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    if args.precision.startswith("amp"):
        other = torch.amp.GradScaler("cuda")
        return other
