# Trains the attention block under bf16 autocast: the query the rotary tables are cast to is bf16 here.
import torch

from lm.rotary import Attention


def main(loader):
    model = Attention(64).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for x in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x.cuda()).float().square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()


if __name__ == "__main__":
    main([torch.randn(2, 16, 64) for _ in range(4)])
