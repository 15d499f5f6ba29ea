import torch

from blocks_for_train import Block


def main():
    model = Block().cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for step in range(100):
        x = torch.randn(8, 64, device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).float().pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()


if __name__ == "__main__":
    main()
