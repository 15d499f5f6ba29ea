# The method that builds the scaler takes `enabled` from its callers, and the one caller passes a test that holds only
# for fp16: bf16 runs get a disabled scaler.
import torch


class Capture:
    def __init__(self, model, use_gradscaler: bool = True, amp_type=torch.bfloat16):
        self.model = model
        if amp_type == torch.bfloat16 and not torch.cuda.is_bf16_supported():
            amp_type = torch.float16
        self.amp_dtype = amp_type
        scaler_enabled = use_gradscaler and amp_type == torch.float16
        self.scaler = self._init_amp_scaler(scaler_enabled)

    def _init_amp_scaler(self, scaler_enabled: bool) -> torch.cuda.amp.GradScaler:
        scaler = torch.cuda.amp.GradScaler(enabled=scaler_enabled)
        return scaler
