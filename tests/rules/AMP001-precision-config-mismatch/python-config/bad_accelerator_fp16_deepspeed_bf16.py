# The Accelerator asks for fp16; the DeepSpeed config dict handed to its plugin enables bf16.
from accelerate import Accelerator, DeepSpeedPlugin

ds_config = {"bf16": {"enabled": True}, "zero_optimization": {"stage": 2}, "train_micro_batch_size_per_gpu": 2}
accelerator = Accelerator(mixed_precision="fp16", deepspeed_plugin=DeepSpeedPlugin(hf_ds_config=ds_config))  # ampdoctor: expect[AMP001]
