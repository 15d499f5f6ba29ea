# The fixes of Lightning-AI/litgpt PR #1246 and its later revision: copy the merged checkpoints into the model's own
# dtype (no `assign`), or assign and cast the model to one dtype right after. A single checkpoint, or shards read
# in one requested dtype, are not two precisions.
import torch
from safetensors.torch import load_file


def merge_by_copy(net, base_path, lora_path):
    weights = torch.load(base_path, mmap=True)
    weights.update(torch.load(lora_path, mmap=True))
    net.load_state_dict(weights, strict=False)
    return net


def merge_then_cast(build, base_path, lora_path):
    with torch.device("meta"):
        net = build()
    weights = torch.load(base_path, mmap=True)
    lora = torch.load(lora_path, mmap=True)
    weights.update(lora)
    net.load_state_dict(weights, assign=True)
    net.to(dtype=next(iter(lora.values())).dtype)
    return net


def load_shards(build, load_shard, paths, dtype):
    with torch.device("meta"):
        net = build()
    weights = load_shard(paths[0], dtype=dtype)
    weights.update(load_shard(paths[1], dtype=dtype))
    net.load_state_dict(weights, assign=True)
    return net
