# This module turns autocast off around its own rotary math: the library's models are written to run under an
# ambient autocast (a user's training step, a pipeline's).
import torch


def rope_angles(inv_freq, position_ids):
    with torch.autocast(device_type=position_ids.device.type, enabled=False):
        return inv_freq[None, :, None].float() @ position_ids[:, None, :].float()
