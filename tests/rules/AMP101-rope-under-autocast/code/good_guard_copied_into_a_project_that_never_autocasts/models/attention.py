# Copied from a model library with its guard, which turns mixed precision off around its own rotary math. In this
# project it guards nothing: no run turns mixed precision on.
import torch


def rope_angles(inv_freq, position_ids):
    with torch.autocast(device_type=position_ids.device.type, enabled=False):
        return inv_freq[None, :, None].float() @ position_ids[:, None, :].float()
