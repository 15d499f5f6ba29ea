"""ampdoctor: BF16 mixed-precision training for PyTorch, correct by construction."""

__version__ = "0.1.0"
