# Only the call inside `pytest.raises` is expected to fail; the one after the block crashes the test.
import pytest
import torch


def test_export():
    weights = torch.randn(4, 4, dtype=torch.bfloat16)
    with pytest.raises(TypeError):
        weights.numpy()
    return weights.numpy()  # ampdoctor: expect[AMP129]
