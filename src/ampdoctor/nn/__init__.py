"""Safe components: RoPE whose tables, positions and math cannot be in the wrong precision."""

from ampdoctor.nn.layouts import convert_qk_layout, layout_permutation
from ampdoctor.nn.rope_scaling import ROPE_SCALINGS, Frequencies, rope_frequencies
from ampdoctor.nn.rotary import RotaryEmbedding
from ampdoctor.nn.rotary_math import apply_rotary

__all__ = [
    "ROPE_SCALINGS",
    "Frequencies",
    "RotaryEmbedding",
    "apply_rotary",
    "convert_qk_layout",
    "layout_permutation",
    "rope_frequencies",
]
