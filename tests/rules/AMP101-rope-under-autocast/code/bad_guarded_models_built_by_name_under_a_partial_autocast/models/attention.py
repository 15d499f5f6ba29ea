# Copied from a model library, with its guard: autocast turned off around its own rotary math. In this project it
# guards nothing, as no run enters autocast.
import torch


def rope_angles(inv_freq, position_ids):
    with torch.autocast(device_type=position_ids.device.type, enabled=False):
        return inv_freq[None, :, None].float() @ position_ids[:, None, :].float()
