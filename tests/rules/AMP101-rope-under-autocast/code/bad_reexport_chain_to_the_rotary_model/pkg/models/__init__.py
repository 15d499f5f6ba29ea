from .lm import RotaryLM
