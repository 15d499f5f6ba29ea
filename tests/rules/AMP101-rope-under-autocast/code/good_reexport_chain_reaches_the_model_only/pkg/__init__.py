from .models import TinyLM
