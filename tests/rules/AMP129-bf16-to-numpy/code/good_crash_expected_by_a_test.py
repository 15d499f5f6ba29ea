# A test that asserts the crash happens: `.numpy()` on a bf16 tensor inside `pytest.raises` (or
# `assertRaises`) is written to fail, so it is no bug. The same call outside the block is still one.
import unittest

import numpy as np
import pytest
import torch


def test_numpy_refuses_bf16():
    t = torch.zeros(2, 2, dtype=torch.bfloat16)
    with pytest.raises(TypeError):
        t.numpy()
    assert np.allclose(t.float().numpy(), 0)


class NumpyBridge(unittest.TestCase):
    def test_refuses_bf16(self):
        t = torch.ones(3, dtype=torch.bfloat16)
        with self.assertRaises(TypeError):
            np.asarray(t)
