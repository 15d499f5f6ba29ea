"""Whether a device really has bf16: native instructions, not the emulation that
`torch.cuda.is_bf16_supported()` counts by default (pytorch PR #148322)."""

from __future__ import annotations

import platform
import subprocess
from dataclasses import dataclass
from pathlib import Path

import torch

from ampdoctor.facts import Device

# AMD architectures with bf16 matrix instructions (MI100 onwards, RDNA3 onwards).
_ROCM_BF16_ARCHS = ("gfx908", "gfx90a", "gfx94", "gfx95", "gfx11", "gfx12")


@dataclass(frozen=True)
class Bf16Support:
    device: str
    native: bool
    reason: str


def cpu_bf16_flags() -> tuple[str, ...]:
    """The CPU feature flags that give native bf16 arithmetic (x86 AVX512-BF16/AMX-BF16, Arm BF16)."""
    wanted = {"avx512_bf16", "amx_bf16", "bf16", "avx_ne_convert"}
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip().lower() in ("flags", "features"):
                return tuple(sorted(wanted & set(value.split())))
        return ()
    if platform.system() == "Darwin":
        try:
            out = subprocess.run(["sysctl", "-n", "hw.optional.arm.FEAT_BF16"], capture_output=True, text=True, timeout=5)
            return ("bf16",) if out.stdout.strip() == "1" else ()
        except (OSError, subprocess.SubprocessError):
            return ()
    return ()


def bf16_support(device: str | torch.device) -> Bf16Support:
    dev = torch.device(device)
    if dev.type == "cpu":
        flags = cpu_bf16_flags()
        if flags:
            return Bf16Support("cpu", True, f"CPU has {', '.join(flags)}")
        return Bf16Support("cpu", False, "CPU has no bf16 instructions (avx512_bf16/amx_bf16/arm bf16); bf16 runs through slow conversions")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            return Bf16Support(str(dev), False, "CUDA is not available")
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        name = f"cuda:{index} ({props.name})"
        if torch.version.hip:
            arch = getattr(props, "gcnArchName", "")
            native = arch.startswith(_ROCM_BF16_ARCHS)
            return Bf16Support(name, native, f"ROCm architecture {arch or 'unknown'}" + ("" if native else " has no bf16 matrix instructions"))
        major, minor = props.major, props.minor
        if (major, minor) >= (8, 0):
            return Bf16Support(name, True, f"compute capability {major}.{minor}")
        return Bf16Support(name, False, f"compute capability {major}.{minor} < 8.0: bf16 is emulated (is_bf16_supported() may still say True)")
    if dev.type == "mps":
        native = torch.backends.mps.is_available()
        return Bf16Support("mps", native, "MPS bf16 (macOS 14+)" if native else "MPS is not available")
    return Bf16Support(str(dev), False, f"no bf16 check for device type {dev.type!r}")


def device_fact(device: str | torch.device) -> Device:
    """The device as a `RunFacts` device: native bf16, and whether torch claims a bf16 it only emulates."""
    dev = torch.device(device)
    support = bf16_support(dev)
    capability = None
    emulated = False
    if dev.type == "cuda" and torch.cuda.is_available() and not torch.version.hip:
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        major, minor = torch.cuda.get_device_capability(index)
        capability = f"{major}.{minor}"
        emulated = not support.native and bool(torch.cuda.is_bf16_supported())
    return Device(support.device, support.native, emulated_bf16=emulated, capability=capability, reason=support.reason)
