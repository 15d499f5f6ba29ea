# A Function whose only application is a metric computed on fp32 features outside any autocast: the file's autocast
# wraps a feature extractor's forward elsewhere, which never reaches the metric, so nothing mixed arrives.
import torch
from torch import nn


class FeatureExtractor(nn.Module):
    def __init__(self, backbone):
        super().__init__()
        self.backbone = backbone

    def forward(self, images):
        with torch.autocast("cuda", dtype=torch.float16):
            feats = self.backbone(images)
        return feats.float()


class _SymmetricSqrt(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        vals, vecs = torch.linalg.eigh(a)
        root = vecs @ torch.diag_embed(vals.clamp_min(0).sqrt()) @ vecs.mT
        ctx.save_for_backward(root)
        return root

    @staticmethod
    def backward(ctx, grad):
        (root,) = ctx.saved_tensors
        return torch.linalg.solve(root + root.mT, grad)


symmetric_sqrt = _SymmetricSqrt.apply


def frechet_distance(x, y):
    mu_x, mu_y = x.mean(0), y.mean(0)
    cov_x, cov_y = torch.cov(x.T), torch.cov(y.T)
    cross = symmetric_sqrt(cov_x @ cov_y)
    return (mu_x - mu_y).pow(2).sum() + torch.trace(cov_x + cov_y - 2 * cross)


@torch.no_grad()
def evaluate(extractor, real, fake):
    return frechet_distance(extractor(real), extractor(fake))
