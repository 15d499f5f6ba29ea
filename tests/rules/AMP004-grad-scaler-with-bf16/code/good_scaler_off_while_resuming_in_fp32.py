# The scaler is on unless a resume runs its first epochs in fp32; the flag says nothing about bf16 and the file
# binds it only to False (the command line sets it), so `not flag` is "usually on", not "only for bf16".
import argparse

import torch


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fp32-resume", action="store_true")
    args = parser.parse_args()
    model = torch.nn.Linear(4, 4).cuda()
    optimizer = torch.optim.AdamW(model.parameters())
    for epoch in range(10):
        if args.fp32_resume and epoch > 1:
            args.fp32_resume = False
        scaler = torch.cuda.amp.GradScaler(enabled=not args.fp32_resume)
        with torch.cuda.amp.autocast(enabled=not args.fp32_resume):
            loss = model(torch.randn(2, 4, device="cuda")).sum()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
