# A style-modulated generator that runs some layers in fp16 by casting their activations only: the weights, the
# styles and the latents stay fp32. The normalising helpers get what the callers hand them: the latents cast to
# fp32 on the way in, the fp32 weight and styles left alone while the caller casts the activations.
import torch


def normalize_second_moment(x, dim=1, eps=1e-8):
    return x * (x.square().mean(dim=dim, keepdim=True) + eps).rsqrt()


def modulated_conv(x, w, s, demodulate=True):
    if demodulate:
        w = w * w.square().mean([1, 2, 3], keepdim=True).rsqrt()
        s = s * s.square().mean().rsqrt()
    w = w.unsqueeze(0) * s.reshape(s.shape[0], 1, -1, 1, 1)
    return torch.nn.functional.conv2d(x.reshape(1, -1, *x.shape[2:]), w.reshape(-1, *w.shape[2:]).to(x.dtype), groups=x.shape[0])


class Mapping(torch.nn.Module):
    def __init__(self, z_dim, c_dim, w_dim):
        super().__init__()
        self.embed = torch.nn.Linear(c_dim, w_dim)
        self.fc = torch.nn.Linear(z_dim + w_dim, w_dim)

    def forward(self, z, c):
        x = normalize_second_moment(z.to(torch.float32))
        y = normalize_second_moment(self.embed(c.to(torch.float32)))
        return self.fc(torch.cat([x, y], dim=1))


class SynthesisLayer(torch.nn.Module):
    def __init__(self, channels, w_dim, use_fp16=False):
        super().__init__()
        self.use_fp16 = use_fp16
        self.affine = torch.nn.Linear(w_dim, channels)
        self.weight = torch.nn.Parameter(torch.randn(channels, channels, 3, 3))

    def forward(self, x, w):
        styles = self.affine(w)
        dtype = torch.float16 if self.use_fp16 and x.device.type == "cuda" else torch.float32
        return modulated_conv(x=x.to(dtype), w=self.weight, s=styles)
