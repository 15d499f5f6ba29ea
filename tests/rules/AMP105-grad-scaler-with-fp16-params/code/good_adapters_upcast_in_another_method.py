# A trainer class adds the adapters to the fp16-cast base in one method and, in the method that builds the
# optimizer (run before any step), casts the trainable parameters of that same model back to fp32 on the fp16 path.
import torch
from accelerate import Accelerator
from diffusers.training_utils import cast_training_params
from peft import LoraConfig


class LoraTrainer:
    def __init__(self, args, transformer):
        self.args = args
        self.transformer = transformer
        self.accelerator = Accelerator(mixed_precision=args.mixed_precision)

    def prepare_trainable_parameters(self):
        weight_dtype = torch.float32
        if self.accelerator.mixed_precision == "fp16":
            weight_dtype = torch.float16
        elif self.accelerator.mixed_precision == "bf16":
            weight_dtype = torch.bfloat16
        self.transformer.requires_grad_(False)
        self.transformer.to(self.accelerator.device, dtype=weight_dtype)
        self.transformer.add_adapter(LoraConfig(r=8, target_modules=["to_q", "to_v"]))

    def prepare_optimizer(self):
        if self.args.mixed_precision == "fp16":
            cast_training_params([self.transformer], dtype=torch.float32)
        params = [p for p in self.transformer.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(params, lr=1e-4)
        self.transformer, self.optimizer = self.accelerator.prepare(self.transformer, self.optimizer)
