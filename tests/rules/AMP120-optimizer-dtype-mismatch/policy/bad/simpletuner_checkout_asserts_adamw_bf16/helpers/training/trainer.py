# Trainer code of a SimpleTuner checkout from before 774279e (Oct 2025): adamw_bf16 is picked from the weight dtype
# but the parameters are handed to it as they are, and its step asserts bf16.
import torch


class Trainer:
    def init_precision(self):
        self.config.enable_adamw_bf16 = self.config.weight_dtype == torch.bfloat16

    def init_optimizer(self, optimizer_class):
        self.optimizer = optimizer_class(self.params_to_optimize, lr=self.config.learning_rate)
