# Lightning-AI/litgpt PR #1246: a base checkpoint is updated with the LoRA checkpoint and loaded with `assign=True`
# into a model built on the meta device; each parameter keeps its checkpoint's dtype (bf16 base, fp32 LoRA), and
# merging the adapters into the base weights fails on mixed dtypes.
import torch
from safetensors.torch import load_file


def merge_adapter(build, base_path, lora_path):
    with torch.device("meta"):
        net = build()
    weights = torch.load(base_path, mmap=True)
    extra = load_file(lora_path)
    weights.update(extra.get("state", extra))
    net.load_state_dict(weights, strict=False, assign=True)  # ampdoctor: expect[AMP127:warning]
    return net
