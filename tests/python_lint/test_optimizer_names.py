"""The step of an optimizer a config names, where a parameter and its gradient differ in dtype (AMP003's config
check): torch's Adam family and fused optimizers raise, SGD-like ones and SimpleTuner's adamw_bf16 take the pair,
and a name that says no library is unknown."""

from __future__ import annotations

import pytest

from ampdoctor.lint.python.optimizers import named_step_fails


@pytest.mark.parametrize("name, fails", [
    ("torch-adamw", True), ("torch.optim.AdamW", True), ("torch-nadam", True), ("adamw_torch", True),
    ("adamw_torch_fused", True), ("torch-sgd", False), ("torch.optim.SGD", False), ("torch-adafactor", False),
    ("adamw_bf16", False), ("AdamW", None), ("adamw_hf", None), ("optimi-adamw", None), ("torch-asgd", None), (None, None),
])
def test_named_step_fails(name, fails):
    assert named_step_fails(name) is fails
