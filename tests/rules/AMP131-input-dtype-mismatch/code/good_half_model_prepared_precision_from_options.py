# As good_half_model_prepared_under_mixed_precision.py, with the run's precision read from options another module
# declares: the file cannot say which runs autocast, and those whose weight dtype is half are the ones that do.
import torch
from accelerate import Accelerator
from torch import nn
from train_options import parse_args


def main(args):
    accelerator = Accelerator(mixed_precision=args.mixed_precision)
    net = accelerator.prepare(nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU()))
    weight_dtype = torch.float32
    if accelerator.mixed_precision == "bf16":
        weight_dtype = torch.bfloat16
    net.to(dtype=weight_dtype)
    pred = torch.rand(2, 3, 32, 32, device=accelerator.device)
    return net(pred.float()).mean()


if __name__ == "__main__":
    main(parse_args())
