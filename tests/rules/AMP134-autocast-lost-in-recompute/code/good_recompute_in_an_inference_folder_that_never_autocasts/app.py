import torch

from layers import Block

if __name__ == "__main__":
    model = Block(64).cuda().half().eval()
    with torch.no_grad():
        print(model(torch.randn(8, 64, device="cuda", dtype=torch.float16)))
