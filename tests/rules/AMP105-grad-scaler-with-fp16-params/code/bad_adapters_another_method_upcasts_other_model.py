# A trainer class adds adapters to the fp16-cast transformer; its optimizer method upcasts only the text encoder's
# trainable parameters, and upcasts the transformer's only after the optimizer is built: the transformer's adapters
# stay fp16 when the GradScaler first unscales them.
import torch
from accelerate import Accelerator
from diffusers.training_utils import cast_training_params
from peft import LoraConfig


class LoraTrainer:
    def __init__(self, args, transformer, text_encoder):
        self.args = args
        self.transformer = transformer
        self.text_encoder = text_encoder
        self.accelerator = Accelerator(mixed_precision=args.mixed_precision)

    def prepare_trainable_parameters(self):
        weight_dtype = torch.float32
        if self.accelerator.mixed_precision == "fp16":
            weight_dtype = torch.float16
        self.transformer.requires_grad_(False)
        self.transformer.to(self.accelerator.device, dtype=weight_dtype)
        self.transformer.add_adapter(LoraConfig(r=8, target_modules=["to_q", "to_v"]))  # ampdoctor: expect[AMP105]

    def prepare_optimizer(self):
        if self.args.mixed_precision == "fp16":
            cast_training_params([self.text_encoder], dtype=torch.float32)
        params = [p for p in self.transformer.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(params, lr=1e-4)
        cast_training_params([self.transformer], dtype=torch.float32)
        self.transformer, self.optimizer = self.accelerator.prepare(self.transformer, self.optimizer)
