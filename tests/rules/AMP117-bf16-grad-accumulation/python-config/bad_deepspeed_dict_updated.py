# The precision block added to the dict before the engine is built.
import deepspeed


def build(model):
    config = {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 16, "zero_optimization": {"stage": 2}}
    config["bf16"] = {"enabled": True}  # ampdoctor: expect[AMP117]
    return deepspeed.initialize(model=model, config_params=config)
