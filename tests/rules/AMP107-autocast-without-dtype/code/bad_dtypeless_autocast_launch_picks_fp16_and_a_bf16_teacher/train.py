# The launch line picks fp16 mixed precision and a bf16 teacher: the teacher's bf16 weights run under the fp16 that
# a dtype-less autocast gives, in the project's own run. A warning, not the note of an fp16-only project.
import argparse

import torch
from accelerate import Accelerator

parser = argparse.ArgumentParser()
parser.add_argument("--mixed_precision", type=str, default=None, choices=["no", "fp16", "bf16"])
parser.add_argument("--teacher_dtype", type=str, default="fp32")
args = parser.parse_args()


def main():
    accelerator = Accelerator(mixed_precision=args.mixed_precision)
    teacher_dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[args.teacher_dtype]
    teacher = torch.nn.Linear(16, 16).to(accelerator.device, dtype=teacher_dtype)
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
