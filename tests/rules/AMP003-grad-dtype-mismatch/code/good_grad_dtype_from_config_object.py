# A trainer whose weight dtype is read from a config object populated elsewhere (the shape of SimpleTuner's
# trainer after its fix for bghira/SimpleTuner#854, where the config loader rewrites `gradient_precision=fp32` to
# "unmodified"): the file assigns bf16 on one path only, so it does not make the parameters half, and a bf16
# mention elsewhere in the file is no evidence either.
import torch


class Trainer:
    def __init__(self, config, model, optimizer):
        self.config, self.model, self.optimizer = config, model, optimizer
        if config.optimizer == "adamw_bf16":
            self.config.weight_dtype = torch.bfloat16
        self.model.to("cuda", dtype=self.config.weight_dtype)

    def train(self, loader):
        for batch in loader:
            self.model(**batch).loss.backward()
            if self.config.gradient_precision == "fp32":
                for param in self.model.parameters():
                    if param.grad is not None:
                        param.grad.data = param.grad.data.to(torch.float32)
            self.optimizer.step()
