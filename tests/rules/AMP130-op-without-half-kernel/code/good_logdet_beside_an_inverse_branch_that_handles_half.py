# An invertible 1x1 convolution: only the inverse path, used for sampling, meets half inputs and casts its inverted
# weight to them; the forward path's logdet never runs in the same pass, so nothing here says its weights are half.
import torch
import torch.nn.functional as F


class Invertible1x1(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = torch.nn.Conv1d(c, c, kernel_size=1, bias=False)
        with torch.no_grad():
            self.conv.weight.copy_(torch.linalg.qr(torch.randn(c, c))[0][..., None])  # an orthonormal start

    def forward(self, z, reverse=False):
        W = self.conv.weight.squeeze()
        if reverse:
            W_inverse = W.float().inverse()[..., None]
            if z.type() == "torch.cuda.HalfTensor":
                W_inverse = W_inverse.half()
            return F.conv1d(z, W_inverse)
        else:
            log_det = z.size(0) * z.size(2) * torch.logdet(W)
            return self.conv(z), log_det
