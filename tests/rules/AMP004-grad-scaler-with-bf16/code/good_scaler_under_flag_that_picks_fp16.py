# A flag named for both precisions (`use_fp16_rather_bf16`), bound to a comparison of a number: the file picks
# float16 when it is true, so the scaler it gates is built for fp16 runs only.
import torch


def make(args):
    use_fp16_rather_bf16 = args.mp == 1
    amp_dtype = torch.float16 if use_fp16_rather_bf16 else torch.bfloat16
    scaler = torch.amp.GradScaler("cuda") if use_fp16_rather_bf16 else None
    return torch.autocast("cuda", dtype=amp_dtype), scaler
