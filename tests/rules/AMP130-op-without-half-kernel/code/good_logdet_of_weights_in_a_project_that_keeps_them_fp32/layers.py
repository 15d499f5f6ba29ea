# An invertible 1x1 convolution whose sampling path handles half inputs (line 18), and whose training path takes
# the logdet of the layer's weight, which has no half kernel.
import torch
import torch.nn.functional as F


class Invertible1x1(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = torch.nn.Conv1d(c, c, kernel_size=1, bias=False)
        with torch.no_grad():
            self.conv.weight.copy_(torch.linalg.qr(torch.randn(c, c))[0][..., None])  # an orthonormal start

    def reverse(self, z):
        W = self.conv.weight.squeeze()
        if not hasattr(self, "W_inverse"):
            W_inverse = W.float().inverse()[..., None]
            if z.type() == "torch.cuda.HalfTensor":
                W_inverse = W_inverse.half()
            self.W_inverse = W_inverse
        return F.conv1d(z, self.W_inverse)

    def forward(self, z):
        W = self.conv.weight.squeeze()
        log_det = z.size(0) * z.size(2) * torch.logdet(W)  # ampdoctor: expect[AMP130:info]
        return self.conv(z), log_det
