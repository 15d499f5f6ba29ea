# The autoencoder runs under a dtype-less autocast whose `enabled` is a switch kept from the model config
# (`disable_vae_autocast`); the transformer trains in bf16. One config of the project sets the switch false: that bf16
# run encodes in fp16.
import torch


class Engine(torch.nn.Module):
    def __init__(self, model_config, transformer, vae):
        super().__init__()
        self.transformer = transformer.to(torch.bfloat16)
        self.vae = vae
        self.disable_vae_autocast = model_config.get("disable_vae_autocast", False)

    @torch.no_grad()
    def encode(self, x):
        with torch.autocast("cuda", enabled=not self.disable_vae_autocast):  # ampdoctor: expect[AMP107]
            return self.vae.encode(x)
