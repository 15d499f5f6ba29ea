# bf16 without ZeRO: DeepSpeed's BF16_Optimizer sums micro-batch gradients into fp32 buffers.
import deepspeed

ds_config = {
    "train_micro_batch_size_per_gpu": 4,
    "gradient_accumulation_steps": 8,
    "bf16": {"enabled": True},
}
model_engine, optimizer, _, _ = deepspeed.initialize(model=None, config=ds_config)
