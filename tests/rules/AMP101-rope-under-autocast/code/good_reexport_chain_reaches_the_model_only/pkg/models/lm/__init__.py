from .model import TinyLM
from .rotary_lm import RotaryLM
