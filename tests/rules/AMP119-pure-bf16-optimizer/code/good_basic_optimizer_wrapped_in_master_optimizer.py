# A training engine in the style of DeepSpeed's: it casts the module to bf16, builds a plain "basic" optimizer over
# its parameters and hands it to BF16_Optimizer, which keeps fp32 master partitions and steps from them.
import torch
from deepspeed.runtime.bf16_optimizer import BF16_Optimizer


class Engine:
    def __init__(self, module, lr=1e-4):
        self.module = module.to(torch.bfloat16)
        self.lr = lr
        self.optimizer = self._configure_optimizer()

    def _configure_basic_optimizer(self, params):
        optimizer = torch.optim.AdamW(params, lr=self.lr)
        return optimizer

    def _configure_optimizer(self):
        basic = self._configure_basic_optimizer(self.module.parameters())
        return BF16_Optimizer(basic, param_names={})

    def step(self):
        self.optimizer.step()
