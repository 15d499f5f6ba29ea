from .rotary import AutoModel
