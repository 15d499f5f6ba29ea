"""Hardware named in configs: launcher files (SkyPilot `resources.accelerators`, SageMaker/cloud
`instance_type`, `gpu_type`...) and hardware keys inside any training config. They decide no dtype, but a
bf16 config next to a V100 or T4 asks for bf16 where it is only emulated (AMP113/AMP114)."""

from __future__ import annotations

import re

from ampdoctor.facts import Device
from ampdoctor.frameworks.base import Reading
from ampdoctor.frameworks.located import Document, iter_leaves
from ampdoctor.frameworks.reader import Reader

NAME = "launcher"

_HW_KEY = re.compile(r"(gpu|accelerator|instance_type|instance|machine_type|node_type|device_type|hardware|resources)", re.I)
# GPUs without native bf16 (compute capability < 8.0), and cloud instance families built on them.
_NO_BF16: tuple[tuple[str, str, str], ...] = (
    (r"k80|\bp2\.", "Tesla K80", "3.7"),
    (r"m60|\bg3s?\.", "Tesla M60", "5.2"),
    (r"m40", "Tesla M40", "5.2"),
    (r"p100", "Tesla P100", "6.0"),
    (r"p40", "Tesla P40", "6.1"),
    (r"(?<![a-z0-9])p4(?![0-9a-z])", "Tesla P4", "6.1"),
    (r"v100|\bp3(dn)?\.", "Tesla V100", "7.0"),
    (r"(?<![a-z0-9])t4(?![0-9a-z])|\bg4dn\.", "Tesla T4", "7.5"),
    (r"titan[ _-]?v(?![a-z0-9])", "Titan V", "7.0"),
    (r"rtx[ _-]?20[5-8]0", "GeForce RTX 20xx", "7.5"),
    (r"gtx[ _-]?10[5-8]0", "GeForce GTX 10xx", "6.1"),
    (r"quadro[ _-]?rtx", "Quadro RTX", "7.5"),
)


def hardware_in(doc: Document) -> list[Device]:
    """GPUs without native bf16 named under a hardware-looking key."""
    found: list[Device] = []
    for path, value in iter_leaves(doc):
        if not isinstance(value, str) or not any(isinstance(k, str) and _HW_KEY.search(k) for k in path):
            continue
        text = value.lower()
        for pattern, name, capability in _NO_BF16:
            if re.search(pattern, text):
                found.append(_device(name, capability, doc.at(*path)))
                break
    return found


def _device(name: str, capability: str, location) -> Device:
    # Volta/Turing (7.x): current torch answers is_bf16_supported() with True through emulation (pytorch PR
    # #148322), so the run starts and is slow. Older GPUs: current CUDA wheels no longer build for them and
    # older stacks refuse bf16 outright.
    if float(capability) >= 7.0:
        return Device(name, native_bf16=False, emulated_bf16=True, capability=capability, location=location,
                      reason=f"compute capability {capability} < 8.0: no bf16 tensor cores, bf16 runs emulated")
    return Device(name, native_bf16=False, capability=capability, location=location,
                  reason=f"compute capability {capability} < 7.0: no bf16 support")


def detect(doc: Document) -> bool:
    return isinstance(doc.data, dict) and bool(hardware_in(doc))


def read(doc: Document) -> Reading:
    """A launcher file decides no dtype; its devices join the configs next to it (`lint.configs`)."""
    return Reading(NAME, doc.file)


READER = Reader(NAME, detect, read)
