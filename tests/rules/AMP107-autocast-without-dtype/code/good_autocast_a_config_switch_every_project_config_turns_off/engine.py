# The autoencoder runs under a dtype-less autocast whose `enabled` is a switch kept from the model config
# (`disable_vae_autocast`); the transformer trains in bf16. Every config of the project sets the switch true: no shipped
# run enters this autocast.
import torch


class Engine(torch.nn.Module):
    def __init__(self, model_config, transformer, vae):
        super().__init__()
        self.transformer = transformer.to(torch.bfloat16)
        self.vae = vae
        self.disable_vae_autocast = model_config.get("disable_vae_autocast", False)

    @torch.no_grad()
    def encode(self, x):
        with torch.autocast("cuda", enabled=not self.disable_vae_autocast):
            return self.vae.encode(x)
