"""`ampdoctor run` under torchrun (2 gloo ranks): each rank audits, rank 0 merges, a failing rank
does not stop the merge."""

import json
import os
import subprocess
import sys

SCRIPT = """
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
m = torch.nn.Linear(8, 8).to(torch.bfloat16)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
m(torch.randn(2, 8, dtype=torch.bfloat16)).float().sum().backward()
for p in m.parameters():
    dist.all_reduce(p.grad)
opt.step()
dist.destroy_process_group()
if os.environ["RANK"] == "1":
    raise SystemExit(3)
"""


def test_two_gloo_ranks_merge_into_one_report_even_when_a_rank_fails(tmp_path):
    script = tmp_path / "ddp.py"
    script.write_text(SCRIPT)
    out = tmp_path / "report.json"
    env = {**os.environ, "AMPDOCTOR_MERGE_TIMEOUT": "30", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", "29533",
         "-m", "ampdoctor", "run", "--policy", "bf16-mixed", "--format", "json", "-o", str(out), str(script)],
        cwd=tmp_path, capture_output=True, text=True, timeout=180, env=env,
    )
    assert proc.returncode != 0  # rank 1 exited 3
    data = json.loads(out.read_text())
    assert data["checked"] == [f"rank 0: {script}", f"rank 1: {script}"]
    [coll] = [f for f in data["findings"] if f["name"] == "collective-dtype-mismatch"]
    assert coll["details"]["ranks"] == [0, 1] and coll["location"]["op"] == "c10d::allreduce_"
    assert "reduces bf16 tensors but the policy's reduce dtype is fp32" in coll["message"]
    assert sorted(os.listdir(f"{out}.ranks")) == ["rank0.pkl", "rank1.pkl"]


def test_a_rank_that_never_reports_is_named_in_a_valid_json_report(tmp_path):
    # Rank 0 of a world of 2 whose rank 1 died before writing anything: after the merge timeout the JSON report
    # is still a valid document and names the missing rank as an error (it used to crash on a plain string).
    script = tmp_path / "one.py"
    script.write_text("import torch\nm = torch.nn.Linear(2, 2)\nm(torch.randn(1, 2)).sum().backward()\n")
    env = {**os.environ, "RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29599",
           "TORCHELASTIC_RUN_ID": f"t{os.getpid()}", "AMPDOCTOR_MERGE_TIMEOUT": "2"}
    proc = subprocess.run([sys.executable, "-m", "ampdoctor", "run", "--format", "json", str(script)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    data = json.loads(proc.stdout)
    assert {"file": "rank 1", "message": "wrote no report (the process died or is still running)", "fatal": False} in data["errors"]
    assert data["checked"] == [f"rank 0: {script}"]
