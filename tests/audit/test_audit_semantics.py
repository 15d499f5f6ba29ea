"""Framework semantics the audit must respect: declared grad dtypes, DTensor parameters, torch.compile'd modules."""

import json
import os
import socket
import subprocess
import sys
import textwrap


def _run(tmp_path, body: str, extra_env: dict | None = None):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(body))
    env = {**os.environ, **(extra_env or {})}
    return subprocess.run([sys.executable, "-m", "ampdoctor", "run", "--format", "json", str(script)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_dtensor_parameters_are_audited_without_breaking_the_step(tmp_path):
    proc = _run(tmp_path, """
        import torch
        import torch.distributed as dist
        from torch import nn
        from torch.distributed.tensor import DTensor, Replicate, distribute_module, init_device_mesh

        dist.init_process_group("gloo", rank=0, world_size=1)
        mesh = init_device_mesh("cpu", (1,))

        def replicate_inputs(module, inputs, mesh):
            return tuple(DTensor.from_local(x, mesh, [Replicate()]) for x in inputs)

        model = distribute_module(nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)), mesh, input_fn=replicate_inputs)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(torch.randn(4, 8)).float().pow(2).mean().to_local()
        loss.backward()
        optimizer.step()
        print("stepped", type(next(model.parameters())).__name__)
        dist.destroy_process_group()
    """, {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port())})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "stepped DTensor" in proc.stderr  # the script's stdout goes to stderr when the report owns stdout
    report = json.loads(proc.stdout)
    assert report["findings"] == [] and report["errors"] == []
    assert report["info"]["policy"].startswith("params=fp32,compute=bf16")


def test_a_compiled_module_runs_and_its_ops_are_seen(tmp_path):
    proc = _run(tmp_path, """
        import torch
        from torch import nn

        model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)).to(torch.bfloat16)
        compiled = torch.compile(model, backend="eager")
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
        loss = compiled(torch.randn(16, 8, dtype=torch.bfloat16)).float().pow(2).mean()
        loss.backward()
        optimizer.step()
    """)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    # Pure bf16 weights stepped by plain AdamW at lr 1e-5 inside a compiled module: the measurement still happens.
    assert "AMP119" in {f["id"] for f in report["findings"]}
    # The modules keep the model's own paths (not `_orig_mod.0`), and their ops were recorded.
    rows = {row[0]: row for row in report["tables"][0]["rows"]}
    assert {"0", "1", "2", "<OptimizedModule>"} <= set(rows) and not any(name.startswith("_orig_mod") for name in rows)
    assert rows["0"][6].startswith("bf16:")
