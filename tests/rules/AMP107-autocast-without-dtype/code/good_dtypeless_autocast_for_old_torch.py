# A trainer that enters autocast with the run's dtype, and keeps a dtype-less fallback for a torch too old to
# take `dtype=`: there, CUDA autocast has only fp16 to give and a bf16 run is refused earlier, so the fallback is not
# a bf16 run falling into fp16.
import contextlib

import torch

is_torch_greater_or_equal_than_1_10 = tuple(int(p) for p in torch.__version__.split(".")[:2]) >= (1, 10)


class Trainer:
    def __init__(self, bf16):
        self.use_amp = True
        self.amp_dtype = torch.bfloat16 if bf16 else torch.float16

    def autocast_context(self):
        if not self.use_amp:
            return contextlib.nullcontext()
        if is_torch_greater_or_equal_than_1_10:
            return torch.cuda.amp.autocast(dtype=self.amp_dtype)
        else:
            return torch.cuda.amp.autocast()
