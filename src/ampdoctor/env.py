"""`ampdoctor env`: what this machine can do for mixed precision."""

from __future__ import annotations

import platform
from dataclasses import asdict, dataclass, field
from importlib import metadata
from typing import Any

import torch

from ampdoctor.core.engine import Places, check_policy
from ampdoctor.core.model import Finding, Location
from ampdoctor.facts import Device, RunFacts
from ampdoctor.hardware import bf16_support, cpu_bf16_flags
from ampdoctor.policy import Policy
from ampdoctor.report import Report, ReportInfo, Table

# Libraries whose versions decide which precision bugs apply (distribution names).
LIBRARIES = ("flash-attn", "transformers", "deepspeed", "accelerate", "lightning", "pytorch-lightning", "peft",
             "torchao", "triton", "bitsandbytes", "xformers", "liger-kernel")


@dataclass(frozen=True)
class DeviceInfo:
    name: str
    kind: str
    capability: str
    native_bf16: bool
    emulated_bf16_reported: bool
    reason: str


@dataclass(frozen=True)
class Environment:
    torch_version: str
    torch_build: str
    python: str
    platform: str
    cpu: str
    cpu_capability: str
    cpu_bf16_flags: tuple[str, ...]
    devices: tuple[DeviceInfo, ...]
    float32_matmul_precision: str
    cuda_matmul_allow_tf32: bool
    cudnn_allow_tf32: bool
    nccl_version: str | None
    libraries: dict[str, str | None] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _torch_build() -> str:
    if torch.version.hip:
        return f"ROCm {torch.version.hip}"
    if torch.version.cuda:
        return f"CUDA {torch.version.cuda}"
    return "CPU only"


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _nccl_version() -> str | None:
    if not torch.cuda.is_available() or torch.version.hip:
        return None
    try:
        version = torch.cuda.nccl.version()
    except (AttributeError, RuntimeError):
        return None
    return ".".join(map(str, version)) if isinstance(version, tuple) else str(version)


def collect() -> Environment:
    cpu = bf16_support("cpu")
    devices = [DeviceInfo("cpu", "cpu", "-", cpu.native, cpu.native, cpu.reason)]
    if torch.cuda.is_available():
        for index in range(torch.cuda.device_count()):
            support = bf16_support(f"cuda:{index}")
            major, minor = torch.cuda.get_device_capability(index)
            reported = bool(torch.cuda.is_bf16_supported())
            devices.append(DeviceInfo(support.device, "cuda", f"{major}.{minor}", support.native, reported, support.reason))
    return Environment(
        torch_version=torch.__version__,
        torch_build=_torch_build(),
        python=platform.python_version(),
        platform=platform.platform(),
        cpu=_cpu_name(),
        cpu_capability=str(torch.backends.cpu.get_cpu_capability()),
        cpu_bf16_flags=cpu_bf16_flags(),
        devices=tuple(devices),
        float32_matmul_precision=torch.get_float32_matmul_precision(),
        cuda_matmul_allow_tf32=bool(torch.backends.cuda.matmul.allow_tf32),
        cudnn_allow_tf32=bool(torch.backends.cudnn.allow_tf32),
        nccl_version=_nccl_version(),
        libraries={name: _version(name) for name in LIBRARIES},
    )


def env_facts(env: Environment) -> RunFacts:
    """The machine as `RunFacts`: its GPUs (the CPU is never the bf16 training device that matters) and NCCL."""
    gpus = tuple(Device(d.name, d.native_bf16, emulated_bf16=d.emulated_bf16_reported and not d.native_bf16, capability=d.capability,
                        reason=d.reason, location=Location(label=d.name)) for d in env.devices if d.kind == "cuda")
    nccl = tuple(int(p) for p in env.nccl_version.split(".")[:2] if p.isdigit()) if env.nccl_version else None
    return RunFacts(devices=gpus or None, nccl_version=nccl or None)


def env_findings(env: Environment, policy: Policy | None = None) -> list[Finding]:
    """What the policy-level rules say of training `policy` (bf16-mixed by default) on this machine."""
    facts = env_facts(env)
    return check_policy(policy or Policy.preset("bf16-mixed"), facts, Places(default=Location(label="this machine")))


def env_report(env: Environment) -> Report:
    facts = Table(
        "Environment",
        ("fact", "value"),
        (
            ("torch", f"{env.torch_version} ({env.torch_build})"),
            ("python", env.python),
            ("platform", env.platform),
            ("cpu", f"{env.cpu} [{env.cpu_capability}]"),
            ("cpu bf16 instructions", ", ".join(env.cpu_bf16_flags) or "none"),
            ("float32 matmul precision", env.float32_matmul_precision),
            ("TF32 (cuda matmul / cudnn)", f"{env.cuda_matmul_allow_tf32} / {env.cudnn_allow_tf32}"),
            ("NCCL", env.nccl_version or "-"),
        ),
    )
    devices = Table(
        "Devices",
        ("device", "capability", "native bf16", "is_bf16_supported()", "why"),
        tuple((d.name, d.capability, "yes" if d.native_bf16 else "no", "yes" if d.emulated_bf16_reported else "no", d.reason) for d in env.devices),
    )
    libs = Table("Libraries", ("package", "version"), tuple((k, v or "not installed") for k, v in env.libraries.items()))
    # An environment is not an input with findings or without: say what the rules judged.
    clean = "nothing to report: the policy rules see no problem with bf16-mixed training on this machine (the facts above)"
    return Report.of(env_findings(env), tables=(facts, devices, libs), info=ReportInfo(summary_when_clean=clean))
