from .models import RotaryLM
