"""Fake audit at scale: forward + backward of Llama configs (7B, 70B, 405B) under FakeTensorMode, seq 2048.

Each config is audited in a fresh process, so its seconds (imports + build + step + analysis) and its peak RSS
are its own. Target for the 70B config: <= 10 s and <= 1 GiB peak RSS on 2 cores. ``--bare`` times a bare
FakeTensorMode forward + backward of the same model instead, for comparison.

    .venv/bin/python bench/audit_fake70b.py                      # 7B, 70B, 405B; updates docs/benchmarks.md
    .venv/bin/python bench/audit_fake70b.py --configs 70b --bare
    .venv/bin/python bench/audit_fake70b.py --quick              # a 2-layer config in this process, seconds
    .venv/bin/python bench/audit_fake70b.py --side-by-side 4     # 70B: bare build + step vs audit, alternating, warm
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # benchdocs, when imported from a test
CONFIGS = {name: os.path.join(HERE, f"audit_llama{name}_config.json") for name in ("7b", "70b", "405b")}
TINY = os.path.join(HERE, "audit_tiny_config.json")
CONFIG = CONFIGS["70b"]


def bare(path: str, seq_len: int) -> float:
    from torch._subclasses.fake_tensor import FakeTensorMode

    from ampdoctor.audit.hf import build_model, load_config
    from ampdoctor.policy import Policy

    config = load_config(path)
    with FakeTensorMode():
        model = build_model(config, Policy.parse("bf16-mixed"))
        ids = torch.randint(0, config.vocab_size, (1, seq_len))
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        return time.perf_counter() - start


def side_by_side(path: str, seq_len: int, repeats: int) -> str:
    """The bare FakeTensorMode build + forward + backward against the whole fake audit (build, step, analysis), in one
    warm process, alternating, after one warm-up of each: the medians and their ratio."""
    import statistics

    from torch._subclasses.fake_tensor import FakeTensorMode

    from ampdoctor.audit.hf import audit_hf_config, build_model, load_config
    from ampdoctor.policy import Policy

    config = load_config(path)

    def bare_build_and_step() -> float:
        start = time.perf_counter()
        with FakeTensorMode():
            torch.manual_seed(0)
            model = build_model(config, Policy.parse("bf16-mixed"))
            ids = torch.randint(0, config.vocab_size, (1, seq_len))
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
        return time.perf_counter() - start

    def audited() -> float:
        start = time.perf_counter()
        audit_hf_config(path, fake=True, seq_len=seq_len, policy="bf16-mixed")
        return time.perf_counter() - start

    bare_build_and_step(), audited()
    b, a = [], []
    for _ in range(repeats):
        b.append(bare_build_and_step())
        a.append(audited())
    mb, ma = statistics.median(b), statistics.median(a)
    return f"bare {mb:.2f} s, audited {ma:.2f} s, ratio {ma / mb:.2f} (median of {repeats})"


def measure(path: str, seq_len: int, bare_step: bool) -> dict:
    """One config, in this process: seconds (total and imports + config), ops, findings, peak RSS of the process."""
    start = time.perf_counter()
    # Importing transformers and the model's config module is common to both runs and, on a machine
    # with a small page cache, the noisiest part: it is timed on its own (and still in the total).
    from ampdoctor.audit.hf import load_config

    load_config(path)
    imports = time.perf_counter() - start
    result: dict = {"config": os.path.basename(path), "seq_len": seq_len, "imports_s": imports}
    if bare_step:
        result["step_s"] = bare(path, seq_len)
    else:
        from ampdoctor.audit.hf import audit_hf_config

        a = audit_hf_config(path, fake=True, seq_len=seq_len, policy="bf16-mixed")
        result.update(ops=len(a.recorder.records), findings=len(a.report.findings), errors=len(list(a.report.errors)))
    result["total_s"] = time.perf_counter() - start
    result["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return result


def measure_in_child(path: str, seq_len: int, bare_step: bool) -> dict:
    """`measure` in a fresh interpreter: its peak RSS is this config's alone."""
    code = (f"import json, sys; sys.path.insert(0, {HERE!r}); import audit_fake70b as b; "
            f"print(json.dumps(b.measure({path!r}, {seq_len}, {bare_step})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def rows(results: list[dict]) -> list[list[object]]:
    return [[r["config"], r["seq_len"], f"{r['total_s']:.2f}", f"{r['imports_s']:.2f}",
             f"{r['step_s']:.2f}" if "step_s" in r else r.get("ops", "-"), r.get("findings", "-"), f"{r['peak_rss_mib']:.0f}"]
            for r in results]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seq-len", type=int, default=None, help="default 2048 (64 with --quick)")
    parser.add_argument("--configs", default="7b,70b,405b", help="comma-separated, of " + ", ".join(CONFIGS))
    parser.add_argument("--bare", action="store_true", help="time a bare FakeTensorMode step instead of the audit")
    parser.add_argument("--quick", action="store_true", help="a 2-layer config in this process; no docs")
    parser.add_argument("--no-docs", action="store_true", help="do not write docs/benchmarks.md")
    parser.add_argument("--side-by-side", type=int, metavar="N", help="70B: bare build + step vs the audit, N alternating repeats")
    args = parser.parse_args(argv)
    if args.side_by_side:
        print(side_by_side(CONFIG, args.seq_len or 2048, args.side_by_side))
        return 0
    if args.quick:
        results = [measure(TINY, args.seq_len or 64, args.bare)]
    else:
        results = [measure_in_child(CONFIGS[name], args.seq_len or 2048, args.bare) for name in args.configs.split(",")]
    import benchdocs

    header = ["config", "seq", "total s", "of which imports + config s", "bare step s" if args.bare else "ops recorded",
              "findings", "peak RSS MiB"]
    table = benchdocs.markdown_table(header, rows(results))
    print(table)
    if not (args.quick or args.no_docs):
        benchdocs.write_block("fake-audit" + ("-bare" if args.bare else ""), "## Fake audit at scale (bench/audit_fake70b.py)",
                              benchdocs.stamp() + "\n\nEach config in a fresh process (FakeTensorMode, bf16-mixed, batch 1):\n\n"
                              + table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
