# Trainer code of a SimpleTuner checkout from 774279e (Oct 2025) on: before building adamw_bf16 it casts the trained
# parameters to bf16 itself, so the optimizer never sees fp32 weights.
import torch


class Trainer:
    def init_optimizer(self, optimizer_class):
        if self.config.weight_dtype != torch.bfloat16:
            self.config.weight_dtype = torch.bfloat16
        self._ensure_parameter_dtype(self.params_to_optimize, torch.bfloat16, optimizer_name="adamw_bf16")
        self.optimizer = optimizer_class(self.params_to_optimize, lr=self.config.learning_rate)

    def _ensure_parameter_dtype(self, parameters, dtype, optimizer_name=None):
        for param in parameters:
            param.data = param.data.to(dtype)
