# The device a script's settings name: argparse, a config object or hyperparameters hold the type string
# ("cuda", "cpu"), which is what autocast takes; only a tensor's or module's `.device` is a torch.device.
import argparse

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--device", default="cuda")
args = parser.parse_args()


def train(model, batch, cfg):
    with torch.autocast(device_type=args.device, dtype=torch.bfloat16):
        loss = model(batch)
    with torch.autocast(cfg.device, dtype=torch.bfloat16):
        loss = loss + model(batch)
    return loss


class Trainer:
    def __init__(self, config):
        self.config = config

    def step(self, model, batch):
        with torch.autocast(self.config.device, dtype=torch.bfloat16):
            return model(batch)


def run(cfg):
    # a section of a nested (OmegaConf/Hydra) config: its `device` is the yaml string too
    for batch in cfg.data:
        with torch.autocast(device_type=cfg.training.device, dtype=torch.bfloat16):
            yield batch
