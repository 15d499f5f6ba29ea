# The dict leaves the precision to the Accelerator ("auto"), which fills it with bf16.
from accelerate import Accelerator, DeepSpeedPlugin

ds_config = {"bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"}, "zero_optimization": {"stage": 2}}
accelerator = Accelerator(mixed_precision="bf16", deepspeed_plugin=DeepSpeedPlugin(hf_ds_config=ds_config))
