import lightning as L
import torch

from model import Head


class Regressor(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.head = Head(64, 3)

    def training_step(self, batch, batch_idx):
        features, target = batch
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = self.head(features)
        return torch.nn.functional.mse_loss(out.float(), target)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-4)


def main(loader):
    L.Trainer(max_epochs=1).fit(Regressor(), loader)
