import json
import subprocess
import sys

import torch

from ampdoctor import hardware
from ampdoctor.env import DeviceInfo, collect, env_findings, env_report
from ampdoctor.report import render_text


def test_collect_describes_this_machine():
    env = collect()
    assert env.torch_version == torch.__version__
    assert env.devices[0].kind == "cpu"
    assert env.float32_matmul_precision in ("highest", "high", "medium")
    assert "transformers" in env.libraries


def test_cpu_bf16_follows_cpu_flags(monkeypatch):
    monkeypatch.setattr(hardware, "cpu_bf16_flags", lambda: ())
    support = hardware.bf16_support("cpu")
    assert not support.native and "no bf16 instructions" in support.reason
    monkeypatch.setattr(hardware, "cpu_bf16_flags", lambda: ("amx_bf16", "avx512_bf16"))
    assert hardware.bf16_support("cpu").native


def test_cuda_absent_is_not_native(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    support = hardware.bf16_support("cuda")
    assert support.native is False and support.reason == "CUDA is not available"


def test_emulated_gpu_bf16_is_flagged():
    env = collect()
    t4 = DeviceInfo("cuda:0 (Tesla T4)", "cuda", "7.5", False, True, "compute capability 7.5 < 8.0")
    v100 = DeviceInfo("cuda:1 (V100)", "cuda", "7.0", False, False, "compute capability 7.0 < 8.0")
    env = env.__class__(**{**env.__dict__, "devices": env.devices + (t4, v100), "nccl_version": "2.8.3"})
    assert [f.name for f in env_findings(env)] == ["bf16-unsupported-hardware", "bf16-unsupported-hardware", "bf16-support-emulated"]
    assert "Tesla T4" in render_text(env_report(env), width=200)


def test_cli_env_text_and_json():
    text = subprocess.run([sys.executable, "-m", "ampdoctor", "env"], capture_output=True, text=True, check=True).stdout
    assert "native bf16" in text and torch.__version__ in text
    data = json.loads(subprocess.run([sys.executable, "-m", "ampdoctor", "env", "--format", "json"], capture_output=True, text=True, check=True).stdout)
    assert data["environment"]["torch_version"] == torch.__version__
    assert data["environment"]["devices"][0]["name"] == "cpu"


def test_env_summary_says_what_was_judged_never_a_bare_no_findings():
    env = collect()
    # a machine with nothing to report, whatever this one has: a CPU with bf16 instructions and an Ampere GPU
    cpu = DeviceInfo("cpu", "cpu", "", True, False, "CPU has avx512_bf16")
    a100 = DeviceInfo("cuda:0 (A100)", "cuda", "8.0", True, False, "compute capability 8.0")
    env = env.__class__(**{**env.__dict__, "devices": (cpu, a100), "nccl_version": "2.21.5"})
    report = env_report(env)
    assert report.findings == ()
    last = render_text(report, width=200).strip().splitlines()[-1]
    assert last == "nothing to report: the policy rules see no problem with bf16-mixed training on this machine (the facts above)"
    t4 = DeviceInfo("cuda:0 (Tesla T4)", "cuda", "7.5", False, False, "compute capability 7.5 < 8.0")
    with_t4 = env_report(env.__class__(**{**env.__dict__, "devices": env.devices + (t4,)}))
    assert render_text(with_t4, width=200).strip().splitlines()[-1].startswith("1 error")
