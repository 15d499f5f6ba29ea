# The engine enters its dtype-less autocast only with `use_amp`, which defaults to False all the way to the
# trainer's `main`; but the launcher passes `--use_amp=True` to it (python-fire): the autocast runs, in fp16 while
# the project trains bf16, a warning.
import torch


class Engine:
    def __init__(self, model, optimizer, use_amp=False):
        self.model = model
        self.optimizer = optimizer
        self.use_amp = use_amp

    def step(self, x, y):
        if self.use_amp:
            with torch.autocast("cuda"):  # ampdoctor: expect[AMP107:warning]
                loss = torch.nn.functional.cross_entropy(self.model(x), y)
        else:
            loss = torch.nn.functional.cross_entropy(self.model(x), y)
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad()
        return loss
