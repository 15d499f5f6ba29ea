# No round trip in the file: one resizer builds its grid in fp32 itself (a made tensor, not an upcast input), so the
# file says nothing of the other's input being half.
import torch
import torch.nn.functional as F


def resize_grid(grid, size):
    return F.interpolate(grid, size=size, mode="bilinear")


def coordinate_grid(h, w, size):
    ys = torch.linspace(-1, 1, h, dtype=torch.float32)
    grid = torch.stack(torch.meshgrid(ys, ys, indexing="ij"))[None]
    return F.interpolate(grid, size=size, mode="bilinear")
