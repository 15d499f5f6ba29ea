# Two resizers of a grid embedding: the second rebinds its input to fp32 around the interpolation and casts back
# (a half grid fails there: no CPU kernel with antialias, none for bf16 on CUDA in old torch); the first hands the
# same kind of input to the op uncast.
import torch.nn.functional as F


def resize_grid(grid, size):
    grid = grid.permute(0, 3, 1, 2)
    grid = F.interpolate(grid, size=size, mode="bicubic", antialias=True)  # ampdoctor: expect[AMP130:warning]
    return grid.permute(0, 2, 3, 1)


def resize_grid_channels_last(grid, size):
    keep = grid.dtype
    grid = grid.float()
    grid = F.interpolate(grid.permute(0, 3, 1, 2), size=size, mode="bicubic", antialias=True)
    return grid.permute(0, 2, 3, 1).to(keep)
