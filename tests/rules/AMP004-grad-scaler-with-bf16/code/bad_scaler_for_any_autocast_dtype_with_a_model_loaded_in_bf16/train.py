import argparse

import torch

from models import build
from solver import train


def batches(n):
    for _ in range(n):
        yield torch.randn(8, 64, device="cuda")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--amp_dtype", default="bf16")
    args = parser.parse_args()
    model = build(torch.bfloat16).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    train(args, model, optimizer, batches(100))
