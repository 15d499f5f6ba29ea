import torch

from model.rotary import Rotary


def main() -> None:
    rotary = Rotary(64)
    print(rotary(torch.arange(16)).shape)


if __name__ == "__main__":
    main()
