# An optimizer built only to load a checkpoint's state into (then saved for conversion) is not the training
# optimizer: nothing steps it.
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.fc(x)


model = Net().to(torch.bfloat16)
ckpt_optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
ckpt_optimizer.load_state_dict(torch.load("optimizer.pt"))
torch.save({"model": model.state_dict(), "optimizer": ckpt_optimizer.state_dict()}, "converted.pt")
