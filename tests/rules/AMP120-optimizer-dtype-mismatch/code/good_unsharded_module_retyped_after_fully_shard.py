# FSDP2 shards the student; the teacher, whose parameters are retyped through `.data` afterwards, is never sharded:
# its parameters are plain tensors, and no optimizer steps them.
import torch
from torch.distributed.fsdp import fully_shard


def setup(model: torch.nn.Module, teacher: torch.nn.Module):
    for block in model.layers:
        fully_shard(block)
    fully_shard(model)
    for p in teacher.parameters():
        p.data = p.data.to(torch.float32)
    return model, teacher


class Distiller:
    def setup(self):
        fully_shard(self.student)
        for p in self.teacher.parameters():
            p.data = p.data.to(torch.float32)
