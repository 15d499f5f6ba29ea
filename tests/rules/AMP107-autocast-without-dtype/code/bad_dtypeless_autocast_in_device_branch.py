# The same trainer, but the dtype-less autocast is the arm of a device test, not of a torch version test: every
# CUDA run takes it, and a bf16 run gets fp16.
import contextlib

import torch


class Trainer:
    def __init__(self, bf16, use_cpu):
        self.use_amp = True
        self.use_cpu = use_cpu
        self.amp_dtype = torch.bfloat16 if bf16 else torch.float16

    def autocast_context(self):
        if not self.use_amp:
            return contextlib.nullcontext()
        if self.use_cpu:
            return torch.cpu.amp.autocast(dtype=self.amp_dtype)
        else:
            return torch.cuda.amp.autocast()  # ampdoctor: expect[AMP107]
