# The Accelerator asks for fp16; the DeepSpeed config dict handed to its plugin enables bf16 only under the legacy
# `bfloat16` key. Not the refused opposite-half pair: accelerate adds an fp16 block and `"bf16": {"enabled": false}`,
# which DeepSpeed reads before `bfloat16`, so the run trains in fp16 without failing, not in the file's bf16.
from accelerate import Accelerator, DeepSpeedPlugin

ds_config = {"bfloat16": {"enabled": True}, "zero_optimization": {"stage": 2}, "train_micro_batch_size_per_gpu": 2}
accelerator = Accelerator(mixed_precision="fp16", deepspeed_plugin=DeepSpeedPlugin(hf_ds_config=ds_config))  # ampdoctor: expect[AMP001]
