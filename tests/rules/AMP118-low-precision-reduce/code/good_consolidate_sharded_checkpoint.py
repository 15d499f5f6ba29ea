# A tool that gathers an FSDP run's sharded checkpoint into one file: it wraps the model with the run's policy only
# to read the shards, and never runs a backward pass, so no gradient is ever reduced in bf16.
import torch
from torch.distributed.fsdp import FullStateDictConfig, MixedPrecision, StateDictType
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP


def consolidate(model, shard_path, out_path):
    model = FSDP(model, mixed_precision=MixedPrecision(
        param_dtype=torch.bfloat16,
        reduce_dtype=torch.bfloat16,
        buffer_dtype=torch.bfloat16,
    ))
    with FSDP.state_dict_type(model, StateDictType.SHARDED_STATE_DICT):
        model.load_state_dict(torch.load(shard_path)["model"])
    with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, FullStateDictConfig(rank0_only=True)):
        torch.save(model.state_dict(), out_path)
