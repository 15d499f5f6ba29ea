# huggingface/peft PR #3087: the Cayley transform upcast its half skew matrix on CPU only; cuSOLVER has no half solver
# either, so a bf16/fp16 adapter failed on the GPU.
import torch


def cayley(skew):
    dtype = skew.dtype
    on_cpu = skew.device.type == "cpu" and dtype in (torch.float16, torch.bfloat16)  # ampdoctor: expect[AMP130:warning]
    if on_cpu:
        skew = skew.float()
    eye = torch.eye(skew.shape[0], device=skew.device, dtype=skew.dtype)
    return torch.linalg.solve(eye - skew, eye + skew).to(dtype)
