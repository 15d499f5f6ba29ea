# A plotting script: grid coordinates made half and drawn as a scatter. What it computes ends in a figure; no model
# is trained or served from it (visualisation code: every rule a note).
import matplotlib.pyplot as plt
import torch


def draw(radius: int, out: str) -> None:
    coords = torch.arange(-radius, radius).to(torch.float16) + 0.5
    grid = torch.cartesian_prod(coords, coords)
    plt.scatter(grid[:, 0].float().numpy(), grid[:, 1].float().numpy(), s=2)
    plt.savefig(out)
