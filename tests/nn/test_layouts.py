"""Converting q/k projection weights between half and interleaved layouts preserves attention."""

import pytest
import torch

from ampdoctor.nn import RotaryEmbedding, convert_qk_layout, layout_permutation

HEADS, HEAD_DIM, HIDDEN, SEQ = 4, 16, 32, 10


def attention_logits(x, wq, wk, layout, rotary_dim):
    rope = RotaryEmbedding(HEAD_DIM, rotary_dim=rotary_dim, layout=layout, backend="eager")
    q = (x @ wq.T).view(1, SEQ, HEADS, HEAD_DIM).transpose(1, 2)
    k = (x @ wk.T).view(1, SEQ, HEADS, HEAD_DIM).transpose(1, 2)
    q, k = rope(q, k, torch.arange(100, 100 + SEQ))
    return q @ k.transpose(-1, -2)


@pytest.mark.parametrize("rotary_dim", [HEAD_DIM, 8])
@pytest.mark.parametrize(("source", "target"), [("half", "interleaved"), ("interleaved", "half")])
def test_converted_weights_give_the_same_attention(source, target, rotary_dim):
    torch.manual_seed(0)
    x = torch.randn(1, SEQ, HIDDEN, dtype=torch.float64)
    wq, wk = torch.randn(HEADS * HEAD_DIM, HIDDEN, dtype=torch.float64), torch.randn(HEADS * HEAD_DIM, HIDDEN, dtype=torch.float64)
    expected = attention_logits(x, wq, wk, source, rotary_dim)
    convert = lambda w: convert_qk_layout(w, HEADS, HEAD_DIM, source=source, target=target, rotary_dim=rotary_dim)  # noqa: E731
    assert torch.allclose(attention_logits(x, convert(wq), convert(wk), target, rotary_dim), expected, atol=1e-10)
    # Running the unconverted checkpoint in the other layout is the silent bug (nanotron PR #214).
    assert (attention_logits(x, wq, wk, target, rotary_dim) - expected).abs().max() > 1.0


def test_round_trip_is_the_identity_and_bias_is_supported():
    bias = torch.arange(HEADS * HEAD_DIM, dtype=torch.float32)
    there = convert_qk_layout(bias, HEADS, HEAD_DIM, source="half", target="interleaved")
    assert there[:4].tolist() == [0.0, 8.0, 1.0, 9.0]
    assert torch.equal(convert_qk_layout(there, HEADS, HEAD_DIM, source="interleaved", target="half"), bias)


def test_partial_rotary_leaves_the_pass_through_channels_in_place():
    assert layout_permutation(8, 4, "half", "interleaved").tolist() == [0, 2, 1, 3, 4, 5, 6, 7]


def test_wrong_weight_shape_is_rejected():
    with pytest.raises(ValueError, match="num_heads \\* head_dim = 64 rows"):
        convert_qk_layout(torch.zeros(60, 8), HEADS, HEAD_DIM, source="half", target="interleaved")
