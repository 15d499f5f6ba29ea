import torch

from .model import TinyLM


def build_model(dim: int = 64):
    return TinyLM(dim)


def build_optimizer(params, lr: float = 1e-3):
    return torch.optim.AdamW(params, lr=lr)


def get_model_id(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]
