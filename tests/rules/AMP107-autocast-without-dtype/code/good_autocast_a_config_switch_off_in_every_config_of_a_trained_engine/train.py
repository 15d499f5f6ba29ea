import torch
import yaml

from engine import Engine


def main(path, transformer, vae, loader):
    config = yaml.safe_load(open(path))
    engine = Engine(config["model"], transformer, vae).cuda().to(torch.bfloat16)
    optimizer = torch.optim.AdamW(engine.transformer.parameters(), lr=1e-4)
    for images, targets in loader:
        latents = engine.encode(images.cuda().to(torch.bfloat16))
        loss = torch.nn.functional.mse_loss(engine.transformer(latents).float(), targets.cuda())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
