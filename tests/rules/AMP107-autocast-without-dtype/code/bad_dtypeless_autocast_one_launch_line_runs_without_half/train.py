# As the fp16-launched script, but one launch line runs it without mixed precision: not every run of the project
# is fp16, and a bf16 run is one flag away; a warning.
import argparse

import torch
from accelerate import Accelerator

parser = argparse.ArgumentParser()
parser.add_argument("--mixed_precision", type=str, default=None, choices=["no", "fp16", "bf16"])
args = parser.parse_args()


def main():
    accelerator = Accelerator(mixed_precision=args.mixed_precision)
    weight_dtype = torch.float32
    if accelerator.mixed_precision == "fp16":
        weight_dtype = torch.float16
    elif accelerator.mixed_precision == "bf16":
        weight_dtype = torch.bfloat16
    teacher = torch.nn.Linear(16, 16).to(accelerator.device, dtype=weight_dtype)
    student = torch.nn.Linear(16, 16).to(accelerator.device)
    optimizer = torch.optim.AdamW(student.parameters(), lr=1e-4)
    for _ in range(100):
        x = torch.randn(8, 16, device=accelerator.device)
        with torch.no_grad(), torch.autocast("cuda"):  # ampdoctor: expect[AMP107:warning]
            target = teacher(x)
        loss = torch.nn.functional.mse_loss(student(x).float(), target.float())
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()


if __name__ == "__main__":
    main()
