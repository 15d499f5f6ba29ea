# A DeepSpeed config dict with both precision blocks enabled; DeepSpeed asserts at start-up.
import deepspeed

ds_config = {
    "train_micro_batch_size_per_gpu": 2,
    "fp16": {"enabled": True},
    "bf16": {"enabled": True},  # ampdoctor: expect[AMP115]
    "zero_optimization": {"stage": 2},
}


def main(model):
    engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=ds_config)
    return engine
