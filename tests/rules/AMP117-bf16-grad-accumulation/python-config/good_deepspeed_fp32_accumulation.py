# The fix: an fp32 accumulation dtype next to the bf16 block.
import deepspeed

ds_config = {
    "train_micro_batch_size_per_gpu": 4,
    "gradient_accumulation_steps": 8,
    "bf16": {"enabled": True},
    "data_types": {"grad_accum_dtype": "fp32"},
    "zero_optimization": {"stage": 1},
}
model_engine, optimizer, _, _ = deepspeed.initialize(model=None, config=ds_config)
