import importlib

import torch


def get_module(model, name):
    return dict(model.named_modules())[name]


def load_module(path):
    return importlib.import_module(path)


def rope_angles(position_ids, inv_freq):
    angles = position_ids[:, :, None].float() @ inv_freq[None, None, :].float()
    return torch.cos(angles), torch.sin(angles)
