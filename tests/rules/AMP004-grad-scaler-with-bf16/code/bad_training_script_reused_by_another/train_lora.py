import torch

from train import Net


def main():
    model = Net().cuda()
    for p in model.parameters():
        p.requires_grad_(False)
    head = torch.nn.Linear(64, 64).cuda()
    optimizer = torch.optim.AdamW(head.parameters(), lr=1e-4)
    for step in range(100):
        x = torch.randn(8, 64, device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = head(model(x)).float().pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()


if __name__ == "__main__":
    main()
