"""`ampdoctor run` under torchrun: each rank audits and sends its report as JSON through the launcher's store, rank 0
merges with a deadline. Real launches (gloo, CPU): one node with FSDP2, two nodes with DDP, a rank killed mid-step;
rank 0 alone against a store the test hosts (as torchrun's agent does) for the missing-rank, planted-file and SIGTERM
cases."""

import json
import os
import pickle
import signal
import socket
import stat
import subprocess
import sys
import time
from datetime import timedelta

import torch.distributed as dist

from ampdoctor.audit.distributed import Collected, Exchange, RankInfo, RankReport, merge_reports
from ampdoctor.audit.rankfacts import RankFacts
from ampdoctor.report import Report

LAUNCH = [sys.executable, "-m", "torch.distributed.run"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHELASTIC_", "MASTER_", "RANK", "WORLD_SIZE"))}
    return {**env, "AMPDOCTOR_MERGE_TIMEOUT": "30", "OMP_NUM_THREADS": "1", **extra}


FSDP2_RECIPE = """
import os, torch, torch.distributed as dist
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
dist.init_process_group("gloo")
model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.{reduce})
for layer in (model[0], model[2]):
    fully_shard(layer, mp_policy=mp)
fully_shard(model, mp_policy=mp)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(2):
    if step == 1 and {kill}:
        dist.barrier()  # both ranks finished their first (audited) step: the kill cannot overtake rank 0's step
        if os.environ["RANK"] == "1":
            os.kill(os.getpid(), 9)  # rank 1 dies in the middle of its second step
    loss = model(torch.randn(4, 16)).float().pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
dist.destroy_process_group()
if os.environ["RANK"] == "1":
    raise SystemExit(3)
"""


def test_fsdp2_standard_recipe_merges_without_findings_and_names_the_failing_rank(tmp_path):
    # FSDP2 with bf16 params/compute and fp32 reduce (the standard recipe): sharded params stay fp32, the forward
    # computes in the bf16 all-gathered copy, gradients reduce-scatter in fp32 -> no finding on either rank.
    script = tmp_path / "fsdp2.py"
    script.write_text(FSDP2_RECIPE.format(reduce="float32", kill=False))
    out = tmp_path / "report.json"
    proc = subprocess.run(
        [*LAUNCH, "--nproc-per-node", "2", "--master-port", str(free_port()),
         "-m", "ampdoctor", "run", "--format", "json", "-o", str(out), str(script)],
        cwd=tmp_path, capture_output=True, text=True, timeout=180, env=_env(),
    )
    assert proc.returncode != 0  # rank 1 exited 3
    data = json.loads(out.read_text())
    assert data["checked"] == [f"rank 0: {script}", f"rank 1: {script}"]
    assert data["findings"] == [], data["findings"]
    assert data["info"]["policy"].startswith("params=fp32,compute=bf16,") and "reduce=fp32" in data["info"]["policy"]
    assert data["info"]["ranks"] == {"world_size": 2, "reported": [0, 1], "missing": []}
    assert {"file": "rank 1", "message": "its script exited with code 3", "fatal": False} in data["errors"]
    ranks = out.parent / "report.json.ranks"
    assert sorted(os.listdir(ranks)) == ["rank0.json", "rank1.json"]
    for name in ("rank0.json", "rank1.json"):
        assert stat.S_IMODE((ranks / name).stat().st_mode) == 0o600
        assert RankReport.from_json((ranks / name).read_text()).final
    assert stat.S_IMODE(ranks.stat().st_mode) == 0o700


def test_a_rank_killed_mid_step_is_named_and_bf16_reduce_is_reported(tmp_path):
    # FSDP2 reducing in bf16; rank 1 is SIGKILLed in its second step, after its first (audited) step was reported.
    # torchrun then SIGTERMs rank 0, which still writes the merged report.
    script = tmp_path / "fsdp2_killed.py"
    script.write_text(FSDP2_RECIPE.format(reduce="bfloat16", kill=True))
    out = tmp_path / "report.json"
    start = time.monotonic()
    proc = subprocess.run(
        [*LAUNCH, "--nproc-per-node", "2", "--master-port", str(free_port()),
         "-m", "ampdoctor", "run", "--format", "json", "-o", str(out), str(script)],
        cwd=tmp_path, capture_output=True, text=True, timeout=180, env=_env(),
    )
    assert time.monotonic() - start < 60
    assert proc.returncode != 0
    assert out.exists(), proc.stderr[-6000:]
    data = json.loads(out.read_text())
    [reduce] = [f for f in data["findings"] if f["id"] == "AMP118"]
    assert reduce["details"]["ranks"] == [0, 1] and "all-reduced in bf16 over 2 ranks" in reduce["message"]
    [died] = [e for e in data["errors"] if e["file"] == "rank 1"]
    assert died["message"].startswith("stopped after its audit but its script never ended (pid ")
    assert data["info"]["ranks"]["missing"] == [1]


DDP_HOOK = """
import torch, torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import bf16_compress_hook
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")


def gloo_bf16_hook(state, bucket) -> torch.futures.Future[torch.Tensor]:
    # DDP refuses to register `bf16_compress_hook` by name without NCCL; the same code under another name runs on gloo.
    return bf16_compress_hook(state, bucket)


model = DDP(torch.nn.Linear(16, 16))
model.register_comm_hook(None, gloo_bf16_hook)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
with torch.autocast("cpu", dtype=torch.bfloat16):
    loss = model(torch.randn(4, 16)).float().pow(2).mean()
loss.backward()
opt.step()
dist.destroy_process_group()
"""


def test_two_nodes_one_rendezvous_merge_every_rank(tmp_path):
    # Two torchrun node agents on one machine, each with its own temp dir and working dir, one c10d rendezvous: the
    # ranks never share a file system location, the merged report comes through the store.
    port = free_port()
    procs, nodes = [], []
    for node in range(2):
        home = tmp_path / f"node{node}"
        (home / "tmp").mkdir(parents=True)
        (home / "ddp.py").write_text(DDP_HOOK)
        nodes.append(home)
        procs.append(subprocess.Popen(
            [*LAUNCH, "--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}",
             "--rdzv-id", f"ampdoctor-{os.getpid()}", "-m", "ampdoctor", "run", "--format", "json", "-o", "report.json", "ddp.py"],
            cwd=home, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env(TMPDIR=str(home / "tmp"))))
    logs = [p.communicate(timeout=180)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], logs
    [report] = [home / "report.json" for home in nodes if (home / "report.json").exists()]  # rank 0's node only
    data = json.loads(report.read_text())
    assert data["info"]["ranks"] == {"world_size": 2, "reported": [0, 1], "missing": []}
    assert sorted(data["checked"]) == ["rank 0: ddp.py", "rank 1: ddp.py"]
    [reduce] = [f for f in data["findings"] if f["id"] == "AMP118"]
    assert reduce["details"]["ranks"] == [0, 1] and reduce["location"]["op"] == "c10d::allreduce_"
    hook_line = DDP_HOOK.splitlines().index("    return bf16_compress_hook(state, bucket)") + 1
    assert reduce["location"]["file"] == "ddp.py" and reduce["location"]["line"] == hook_line  # inside the hook
    assert not [f for f in data["findings"] if f["id"] in ("AMP003", "AMP209", "AMP210")]
    # each node left only its own rank's file, and nothing in its temp dir
    assert sorted(p.name for home in nodes for p in (home / "report.json.ranks").iterdir()) == ["rank0.json", "rank1.json"]
    assert [list((home / "tmp").glob("ampdoctor*")) for home in nodes] == [[], []]


# --- rank 0 against a store the test hosts, as torchrun's agent does ---------------------------------


def _host_store() -> tuple[dist.TCPStore, dict]:
    port = free_port()
    store = dist.TCPStore("127.0.0.1", port, is_master=True, timeout=timedelta(seconds=30), wait_for_workers=False)
    env = _env(RANK="0", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), TORCHELASTIC_USE_AGENT_STORE="True",
               TORCHELASTIC_RESTART_COUNT="0", AMPDOCTOR_MERGE_TIMEOUT="2")
    return store, env


def test_planted_reports_in_temp_and_output_dirs_are_never_loaded(tmp_path):
    # Anyone who can write to the temp dir or the output dir plants a rank report: a pickle that runs code when
    # loaded and a JSON report with a forged finding, under every name rank 0 ever used. None of it is read.
    marker = tmp_path / "pwned"
    planted = type("P", (), {"__reduce__": lambda self: (os.mkdir, (str(marker),))})()
    tmp, ranks = tmp_path / "tmp", tmp_path / "report.json.ranks"
    forged_doc = json.loads(RankReport(1, True, Report(checked=("forged",))).to_json())
    forged_doc["report"]["info"]["forged"] = True  # written into the document: no ReportInfo has such a field
    forged = json.dumps(forged_doc)
    for d in (tmp, tmp / "ampdoctor-audit-none-127.0.0.1-1", ranks):
        d.mkdir(parents=True, exist_ok=True)
        for name in ("rank1.pkl", "rank0.pkl"):
            (d / name).write_bytes(pickle.dumps({"rank": 1, "final": True, "report": planted}))
        (d / "rank1.json").write_text(forged)
    script = tmp_path / "one.py"
    script.write_text("import torch\nm = torch.nn.Linear(2, 2)\nm(torch.randn(1, 2)).sum().backward()\n")
    store, env = _host_store()
    proc = subprocess.run([sys.executable, "-m", "ampdoctor", "run", "--format", "json", "-o", "report.json", str(script)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120, env={**env, "TMPDIR": str(tmp)})
    data = json.loads((tmp_path / "report.json").read_text())
    assert not marker.exists()
    assert data["checked"] == [f"rank 0: {script}"] and "forged" not in data["info"]
    assert {"file": "rank 1", "message": "sent no report: it never started its audit (the process died before, or never reached the store)",
            "fatal": False} in data["errors"]
    assert data["info"]["ranks"]["missing"] == [1]
    assert (ranks / "rank1.json").read_text() == forged  # left alone: neither read nor overwritten by rank 0
    assert proc.returncode == 0, proc.stderr


def test_what_a_rank_sends_through_the_store_is_validated_as_data():
    store = dist.HashStore()
    info = RankInfo(0, 3)
    me = Exchange(info, store)
    me.send(Report(checked=("a.py",)), RankFacts(), final=True)
    store.set("started/1", json.dumps({"host": "elsewhere", "pid": 1}))
    store.set("report/1", pickle.dumps({"rank": 1, "final": True}))  # a pickle is not a report
    good = json.loads(RankReport(2, True, Report(checked=("b.py",))).to_json())
    good["report"]["findings"] = [{"id": "AMP118", "name": "x", "severity": "fatal", "message": "m", "fix": "f", "location": {},
                                   "origin": None, "related": [], "details": {}}]
    store.set("report/2", json.dumps(good))  # a finding of an unknown severity
    got = me.collect(timeout=0.3)
    assert sorted(got.reports) == [0] and sorted(got.invalid) == [1, 2]
    merged = merge_reports(got, 3)
    assert [e.message.split(" (")[0] for e in merged.errors] == ["sent a report that was rejected and not used"] * 2
    assert merged.checked == ("rank 0: a.py",)


def test_sigterm_while_the_script_runs_still_writes_the_merged_report(tmp_path):
    # torchrun stops the surviving workers with SIGTERM when one fails: rank 0 ends the script, merges what arrived
    # (rank 1's report, sent before it died) and writes the report; the exit status is the signal's.
    script = tmp_path / "slow.py"
    script.write_text("import time, torch\nm = torch.nn.Linear(2, 2)\nm(torch.randn(1, 2)).sum().backward()\n"
                      "print('ready', flush=True)\ntime.sleep(120)\n")
    store, env = _host_store()
    rank1 = RankReport(1, True, Report(checked=("slow.py",), info={"script_exit_code": 1, "exception": "RuntimeError: boom"}))
    dist.PrefixStore("ampdoctor/audit/0", store).set("report/1", rank1.to_json())
    proc = subprocess.Popen([sys.executable, "-m", "ampdoctor", "run", "--format", "json", "-o", "report.json", str(script)],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**env, "AMPDOCTOR_MERGE_TIMEOUT": "60"})
    assert proc.stdout.readline().strip() == "ready"
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert time.monotonic() - start < 15  # the grace period, not the merge timeout
    assert proc.returncode == 128 + signal.SIGTERM
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["info"]["ended_by"] == "SIGTERM" and data["info"]["script_exit_code"] == 143
    assert data["info"]["ranks"] == {"world_size": 2, "reported": [0, 1], "missing": []}
    assert {"file": "rank 1", "message": "its script exited with code 1 (RuntimeError: boom)", "fatal": False} in data["errors"]
    assert {"file": "rank 0", "message": "was stopped by SIGTERM (the launcher stops every worker when one fails)", "fatal": False} in data["errors"]


def test_the_sigterm_handler_is_restored_after_the_command():
    from ampdoctor.audit.commands import _Termination

    before = signal.getsignal(signal.SIGTERM)
    with _Termination():
        assert signal.getsignal(signal.SIGTERM) is not before
    assert signal.getsignal(signal.SIGTERM) is before


def test_findings_on_some_ranks_only_are_annotated():
    from ampdoctor.core import Finding, Location, Severity

    f = Finding("AMP123", "norm-low-precision", Severity.WARNING, "m", "fix", Location(module="norm"))
    got = Collected(reports={0: RankReport(0, True, Report(findings=(f,))), 1: RankReport(1, True, Report())})
    [merged] = merge_reports(got, 2).findings
    assert merged.details == {"ranks": [0], "not_on_ranks": [1]}
