# bf16 switched on only in a branch that may not run: the block's value is not known, so nothing is claimed.
import deepspeed


def build(model, use_bf16):
    config = {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 16, "zero_optimization": {"stage": 2},
              "data_types": {"grad_accum_dtype": "bf16"}}
    if use_bf16:
        config["bf16"] = {"enabled": True}
    return deepspeed.initialize(model=model, config=config)
