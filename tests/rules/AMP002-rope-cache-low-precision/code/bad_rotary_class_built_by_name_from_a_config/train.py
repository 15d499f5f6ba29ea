import sys

import torch
import yaml


def build(spec: dict):
    module, _, name = spec.pop("_target_").rpartition(".")
    return getattr(__import__(module, fromlist=[name]), name)(**spec)


def main(path: str) -> None:
    rotary = build(yaml.safe_load(open(path))["rotary"])
    print(rotary(torch.arange(16)).shape)


if __name__ == "__main__":
    main(sys.argv[1])
