# The same method handed an on/off flag that bf16 runs set too: the scaler is on for them.
import torch


class Capture:
    def __init__(self, model, use_amp: bool = True, amp_type=torch.bfloat16):
        self.model = model
        self.amp_dtype = amp_type
        self.scaler = self._init_amp_scaler(use_amp)

    def _init_amp_scaler(self, scaler_enabled: bool) -> torch.cuda.amp.GradScaler:
        scaler = torch.cuda.amp.GradScaler(enabled=scaler_enabled)  # ampdoctor: expect[AMP004]
        return scaler
