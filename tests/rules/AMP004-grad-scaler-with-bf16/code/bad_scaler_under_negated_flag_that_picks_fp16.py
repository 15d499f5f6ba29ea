# The flag's name says both precisions, so the file's own use of it decides: it picks float16 when true. The scaler
# is built when it is false, that is for the bf16 runs only, where unscale_ fails.
import torch


def make(args):
    fp16_rather_than_bf16 = args.mixed_precision_mode == 1
    amp_dtype = torch.float16 if fp16_rather_than_bf16 else torch.bfloat16
    scaler = torch.amp.GradScaler("cuda") if not fp16_rather_than_bf16 else None  # ampdoctor: expect[AMP004]
    return torch.autocast("cuda", dtype=amp_dtype), scaler
