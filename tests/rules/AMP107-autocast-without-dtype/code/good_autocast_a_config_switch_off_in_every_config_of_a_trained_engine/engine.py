# The same engine as good_autocast_a_config_switch_every_project_config_turns_off, now built and trained by the
# project's script (which reaches it with its precision): every config still sets the switch true, so no shipped run
# enters this autocast.
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
