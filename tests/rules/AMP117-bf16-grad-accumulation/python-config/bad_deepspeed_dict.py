# bf16 with ZeRO stage 1 and 8 micro-batches: summed in bf16 unless an fp32 accumulation dtype is set.
import deepspeed

ds_config = {
    "train_micro_batch_size_per_gpu": 4,
    "gradient_accumulation_steps": 8,
    "bf16": {"enabled": True},  # ampdoctor: expect[AMP117]
    "zero_optimization": {"stage": 1},
}
model_engine, optimizer, _, _ = deepspeed.initialize(model=None, config=ds_config)
