# The fixed version: both resizers take the fp32 round trip around the interpolation.
import torch.nn.functional as F


def resize_grid(grid, size):
    keep = grid.dtype
    grid = grid.float().permute(0, 3, 1, 2)
    grid = F.interpolate(grid, size=size, mode="bicubic", antialias=True)
    return grid.permute(0, 2, 3, 1).to(keep)


def resize_grid_channels_last(grid, size):
    keep = grid.dtype
    grid = grid.float()
    grid = F.interpolate(grid.permute(0, 3, 1, 2), size=size, mode="bicubic", antialias=True)
    return grid.permute(0, 2, 3, 1).to(keep)
