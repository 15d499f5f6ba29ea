# A cos/sin table in a file that shows nothing of rotating q and k: still reported (the cast loses the angles'
# precision), but the message calls it a cos/sin table: it may be a sinusoidal position table.
import torch


class PositionTable(torch.nn.Module):
    def __init__(self, dim: int, length: int = 4096):
        super().__init__()
        freq = 1.0 / 10000 ** (torch.arange(0, dim, 2).float() / dim)
        angles = torch.outer(torch.arange(length).float(), freq)
        self.cos_cached = angles.cos().half()  # ampdoctor: expect[AMP002]
