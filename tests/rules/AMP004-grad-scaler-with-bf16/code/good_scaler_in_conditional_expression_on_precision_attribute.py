# The scaler is built in one arm of a conditional expression whose test is an attribute set from a comparison of
# the precision mode (1 fp16, 2 bf16): bf16 runs get None. The mode's numbers say no dtype the dataflow can read,
# so no finding states a guess as a fact.
import torch


class Stepper:
    def __init__(self, mixed_precision: int, model, optimizer):
        self.fp16_mode_not_bf16 = mixed_precision == 1
        dtype = torch.float16 if self.fp16_mode_not_bf16 else torch.bfloat16
        self.ctx = torch.autocast("cuda", enabled=mixed_precision > 0, dtype=dtype)
        self.scaler = torch.cuda.amp.GradScaler() if self.fp16_mode_not_bf16 else None
        self.model, self.optimizer = model, optimizer

    def step(self, batch):
        with self.ctx:
            loss = self.model(batch)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            self.optimizer.step()
