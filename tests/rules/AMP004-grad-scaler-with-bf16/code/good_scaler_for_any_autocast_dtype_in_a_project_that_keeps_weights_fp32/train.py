import argparse

import torch

from solver import train


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(64, 64)

    def forward(self, x):
        return self.proj(x)


def batches(n, half_inputs):
    for _ in range(n):
        x = torch.randn(8, 64, device="cuda")
        yield x.half() if half_inputs else x


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--amp_dtype", default="bf16")
    args = parser.parse_args()
    model = Net().cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    train(args, model, optimizer, batches(100, False))
