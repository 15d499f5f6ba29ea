# Unit tests of a wrapper that builds FSDP policies: a policy written as the expected value of an assertion, or
# handed to `fully_shard` after the test replaced it with a fake, reduces no gradient.
import torch
from torch.distributed.fsdp import MixedPrecision, MixedPrecisionPolicy


def test_plugin_builds_the_policy(plugin):
    expected = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16)
    plugin.set_mixed_precision(torch.bfloat16)
    assert plugin.mixed_precision_policy == expected
    assert plugin.mixed_precision_policy != MixedPrecision(param_dtype=torch.float16, reduce_dtype=torch.float16)


def test_kwargs_pass_through(monkeypatch, shard_norms):
    import torch.distributed.fsdp as fsdp

    seen = []
    monkeypatch.setattr(fsdp, "fully_shard", lambda module, mp_policy=None, **kw: seen.append(mp_policy) or module)
    shard_norms(torch.nn.LayerNorm(8), mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16))
    assert seen[0].param_dtype == torch.float32
