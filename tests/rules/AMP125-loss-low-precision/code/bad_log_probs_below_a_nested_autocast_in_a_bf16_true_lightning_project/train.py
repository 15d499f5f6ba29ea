# The Trainer comes from the config; the module it fits builds the backbone.
import hydra
import lightning as L
import torch

from models.backbone import Backbone


class LitModel(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.backbone = Backbone(512, 32000, 12)

    def training_step(self, batch, batch_idx):
        log_probs = self.backbone(batch["x"])
        return -log_probs.gather(-1, batch["y"].unsqueeze(-1)).mean()

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=3e-4)


@hydra.main(version_base=None, config_path="configs", config_name="config")
def main(config):
    trainer = hydra.utils.instantiate(config.trainer)
    trainer.fit(LitModel())


if __name__ == "__main__":
    main()
