# The fp16 block present but switched off.
import deepspeed

ds_config = {
    "train_micro_batch_size_per_gpu": 2,
    "fp16": {"enabled": False},
    "bf16": {"enabled": True},
    "zero_optimization": {"stage": 2},
}
engine, *_ = deepspeed.initialize(model=None, config=ds_config)
