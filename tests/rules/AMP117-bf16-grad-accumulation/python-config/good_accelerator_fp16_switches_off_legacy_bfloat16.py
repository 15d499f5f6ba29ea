# The Accelerator asks for fp16 and hands its plugin a DeepSpeed config that enables bf16 only under the legacy
# `bfloat16` key: accelerate writes `"bf16": {"enabled": false}` and an fp16 block beside it, and DeepSpeed reads
# `bf16` before `bfloat16`, so the run trains in fp16: no gradient is summed in bf16 (AMP001 reports the ignored key).
from accelerate import Accelerator, DeepSpeedPlugin

ds_config = {"bfloat16": {"enabled": True}, "zero_optimization": {"stage": 2}, "gradient_accumulation_steps": 8,
             "train_micro_batch_size_per_gpu": 4}
accelerator = Accelerator(mixed_precision="fp16", deepspeed_plugin=DeepSpeedPlugin(hf_ds_config=ds_config))
