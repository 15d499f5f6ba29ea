"""AMP113 bf16-unsupported-hardware: bf16 is requested on hardware without native bf16 (CUDA compute capability < 8.0, CPU without bf16 instructions, NCCL < 2.10).

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP113`)."""

from __future__ import annotations

from typing import Iterator

from ampdoctor.core.engine import Places
from ampdoctor.core.registry import Hit, policy_check
from ampdoctor.dtypes import BF16
from ampdoctor.facts import RunFacts
from ampdoctor.policy import Policy

# NCCL reduces bf16 from 2.10 (torchtune #891).
NCCL_BF16 = (2, 10)


@policy_check("AMP113")
def bf16_unsupported_hardware(policy: Policy | None, facts: RunFacts, at: Places) -> Iterator[Hit]:
    if policy is None or BF16 not in (policy.params, policy.compute):
        return
    bf16_at = at("compute") if policy.compute == BF16 else at("params")
    for device in facts.devices or ():
        if not device.native_bf16 and not device.emulated_bf16:
            where = device.location or at("devices")
            yield Hit(f"bf16 is asked for on {device.name}" + (f" (compute capability {device.capability})" if device.capability else "")
                      + ", which has no native bf16: it is refused or emulated ('Bfloat16 is only supported on GPUs with compute capability of at least 8.0')",
                      where, related=at.others(where, bf16_at))
    if facts.nccl_version is not None and facts.nccl_version[:2] < NCCL_BF16 and (facts.world_size or 2) > 1:
        yield Hit(f"NCCL {'.'.join(map(str, facts.nccl_version))} < 2.10 cannot reduce bf16 tensors", at("nccl_version"))
