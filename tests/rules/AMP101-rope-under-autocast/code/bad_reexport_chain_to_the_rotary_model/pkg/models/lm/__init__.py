from .rotary_lm import RotaryLM
