# Trains the attention block; the model's dtype comes from configs/model.yaml.
import torch

from rotary import Attention


def main(loader):
    model = Attention(64)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for x in loader:
        loss = model(x).square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()


if __name__ == "__main__":
    main([torch.randn(2, 16, 64) for _ in range(4)])
