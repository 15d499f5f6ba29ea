"""Fake audit at scale: forward + backward of Llama configs (7B, 70B, 405B) under FakeTensorMode, seq 2048.

Per config, a bare FakeTensorMode build + step and the fake audit (the same build and step recorded, then the
report) alternate, each in a fresh process, so that their seconds and peak RSS are their own; both are timed after
the same imports. Targets for the 70B config: audit <= 1.1x bare, <= 1 GiB peak RSS on 2 cores.

    .venv/bin/python bench/audit_fake70b.py                      # 7B, 70B, 405B; updates docs/benchmarks.md
    .venv/bin/python bench/audit_fake70b.py --configs 70b --repeats 5 --layers 8   # a shorter run; no docs
    .venv/bin/python bench/audit_fake70b.py --quick              # a 2-layer config in this process, seconds
    .venv/bin/python bench/audit_fake70b.py --side-by-side 4     # 70B: bare build + step vs audit, alternating, warm
    .venv/bin/python bench/audit_fake70b.py --side-by-side 5 --cpu   # the same runs timed in CPU seconds
    .venv/bin/python bench/audit_fake70b.py --parts 6            # 70B: where the audit's time goes (parts switched off)
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import subprocess
import sys
import time
from typing import Callable

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # benchdocs, when imported from a test
CONFIGS = {name: os.path.join(HERE, f"audit_llama{name}_config.json") for name in ("7b", "70b", "405b")}
TINY = os.path.join(HERE, "audit_tiny_config.json")
CONFIG = CONFIGS["70b"]


def side_by_side(path: str, seq_len: int, repeats: int, cpu: bool = False) -> str:
    """The bare FakeTensorMode build + forward + backward against the whole fake audit (build, step, analysis), in one
    warm process, alternating, after one warm-up of each: the medians and their ratio (wall seconds; with `cpu`, CPU
    seconds, and the minima's ratio too: on a shared machine load only adds time)."""
    import statistics

    from ampdoctor.audit.hf import audit_hf_config

    def audited() -> None:
        audit_hf_config(path, fake=True, seq_len=seq_len, policy="bf16-mixed")

    def bare() -> None:
        bare_build_and_step(path, seq_len)

    clock = time.process_time if cpu else time.perf_counter

    def timed(run: Callable[[], None]) -> float:
        # Each run starts on a collected heap and pays for collecting its own cyclic garbage: otherwise one run's
        # garbage is collected, and timed, inside whichever run comes next.
        gc.collect()
        start = clock()
        run()
        gc.collect()
        return clock() - start

    timed(bare), timed(audited)
    b, a = [], []
    for _ in range(repeats):
        b.append(timed(bare))
        a.append(timed(audited))
    mb, ma = statistics.median(b), statistics.median(a)
    if cpu:
        return (f"CPU s: bare {mb:.3f}, audited {ma:.3f}, ratio {ma / mb:.3f} (median of {repeats}); "
                f"min bare {min(b):.3f}, audited {min(a):.3f}, ratio {min(a) / min(b):.3f}")
    return f"bare {mb:.2f} s, audited {ma:.2f} s, ratio {ma / mb:.2f} (median of {repeats})"


def parts(path: str, seq_len: int, repeats: int) -> str:
    """Where the audit's time goes: the bare run, the whole audit, and the audit with parts of it switched off (the
    recording's dispatch hook; then also the attention-call watch, the module hooks or the autocast patch), in one
    warm process, alternating; CPU seconds (fake tensors run no kernels, so they move less with the machine's load
    than wall seconds), the minimum of `repeats` (load only adds time)."""
    from ampdoctor.audit import dispatch, recorder
    from ampdoctor.audit.hf import audit_hf_config

    def audited(*off: tuple[object, str]) -> Callable[[], None]:
        def run() -> None:
            saved = [(owner, name, getattr(owner, name)) for owner, name in off]
            for owner, name in off:
                setattr(owner, name, lambda *a, **k: None)
            try:
                audit_hf_config(path, fake=True, seq_len=seq_len, policy="bf16-mixed")
            finally:
                for owner, name, value in saved:
                    setattr(owner, name, value)
        return run

    no_recording = (dispatch.RecordingMode, "enter")
    runs = {"bare FakeTensorMode build + step": lambda: bare_build_and_step(path, seq_len),
            "the audit": audited(),
            "the audit without its recording": audited(no_recording),
            "... and without the attention-call watch": audited(no_recording, (recorder.Recorder, "_enter_calls")),
            "... and without the module hooks": audited(no_recording, (recorder.Recorder, "_hook_modules")),
            "... and without the autocast patch": audited(no_recording, (recorder.Recorder, "_patch_autocast"))}

    def cpu(run: Callable[[], None]) -> float:
        gc.collect()
        start = time.process_time()
        run()
        gc.collect()  # each run pays for collecting its own cyclic garbage
        return time.process_time() - start

    for run in runs.values():
        cpu(run)
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            seconds[name].append(cpu(run))
    bare = min(seconds["bare FakeTensorMode build + step"])
    return "\n".join(f"{name}: {min(s):.3f} CPU s, {min(s) / bare:.3f}x (min of {repeats})" for name, s in seconds.items())


def _import_everything(path: str) -> None:
    """What both runs import before their clock starts: transformers, the model's module, FakeTensorMode and the
    audit's own lazily imported parts (analysis, rules). On a machine with a small page cache imports are the
    noisiest part and common to both runs, so the side-by-side ratio leaves them out."""
    from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: F401
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    import ampdoctor.audit.analysis  # noqa: F401
    from ampdoctor.audit.hf import load_config
    from ampdoctor.core import registry

    MODEL_FOR_CAUSAL_LM_MAPPING[type(load_config(path))]
    registry.detectors()  # the rule modules


def bare_build_and_step(path: str, seq_len: int) -> float:
    """Seconds of a bare FakeTensorMode build + forward (bf16 autocast) + backward: what the audit adds its cost to."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from ampdoctor.audit.hf import build_model, load_config
    from ampdoctor.policy import Policy

    start = time.perf_counter()
    config = load_config(path)
    with FakeTensorMode():
        torch.manual_seed(0)
        model = build_model(config, Policy.parse("bf16-mixed"))
        ids = torch.randint(0, config.vocab_size, (1, seq_len))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
    return time.perf_counter() - start


def measure(path: str, seq_len: int, bare_step: bool) -> dict:
    """One config, in this process: seconds (imports, then the bare build + step or the whole audit: build, step,
    analysis), ops, findings, peak RSS of the process."""
    start = time.perf_counter()
    _import_everything(path)
    imports = time.perf_counter() - start
    result: dict = {"config": os.path.basename(path), "seq_len": seq_len, "imports_s": imports}
    cpu = time.process_time()
    if bare_step:
        result["work_s"] = bare_build_and_step(path, seq_len)
    else:
        from ampdoctor.audit.hf import audit_hf_config

        t0 = time.perf_counter()
        a = audit_hf_config(path, fake=True, seq_len=seq_len, policy="bf16-mixed")
        result["work_s"] = time.perf_counter() - t0
        result.update(ops=len(a.recorder.records), findings=len(a.report.findings), errors=len(list(a.report.errors)))
    # CPU seconds too: on a shared machine they move less with the load than wall seconds (fake tensors run no kernels)
    result["work_cpu_s"] = time.process_time() - cpu
    result["total_s"] = time.perf_counter() - start
    result["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return result


def measure_in_child(path: str, seq_len: int, bare_step: bool) -> dict:
    """`measure` in a fresh interpreter: its seconds and peak RSS are this run's alone."""
    code = (f"import json, sys; sys.path.insert(0, {HERE!r}); import audit_fake70b as b; "
            f"print(json.dumps(b.measure({path!r}, {seq_len}, {bare_step})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def side_by_side_fresh(path: str, seq_len: int, repeats: int, run: Callable[[str, int, bool], dict] = measure_in_child) -> dict:
    """Bare and audited runs of one config alternating (bare, audit, audit, bare, ...), each in a fresh process: the
    medians of their seconds after imports, and the audit's ops, findings and peak RSS."""
    import statistics

    bare_s, audit_s, audits, cpu = [], [], [], {True: [], False: []}
    for i in range(repeats):
        for bare_step in ((True, False) if i % 2 == 0 else (False, True)):
            r = run(path, seq_len, bare_step)
            cpu[bare_step].append(r["work_cpu_s"])
            if bare_step:
                bare_s.append(r["work_s"])
            else:
                audit_s.append(r["work_s"])
                audits.append(r)
    last = audits[-1]
    mb, ma = statistics.median(bare_s), statistics.median(audit_s)
    return {"cpu_ratio": statistics.median(cpu[False]) / statistics.median(cpu[True]), "config": last["config"], "seq_len": seq_len, "total_s": statistics.median(r["total_s"] for r in audits),
            "imports_s": statistics.median(r["imports_s"] for r in audits), "bare_s": mb, "audit_s": ma, "ratio": ma / mb,
            "spread": (min(bare_s), max(bare_s), min(audit_s), max(audit_s)), "ops": last["ops"], "findings": last["findings"],
            "peak_rss_mib": max(r["peak_rss_mib"] for r in audits)}


def rows(results: list[dict]) -> list[list[object]]:
    return [[r["config"], r["seq_len"], f"{r['total_s']:.2f}", f"{r['imports_s']:.2f}", f"{r['bare_s']:.2f}", f"{r['audit_s']:.2f}",
             f"{r['ratio']:.2f}x", f"{r['cpu_ratio']:.2f}x", r["ops"], r["findings"], f"{r['peak_rss_mib']:.0f}"] for r in results]


def with_layers(path: str, layers: int | None) -> str:
    """`path`, or a copy of it with `num_hidden_layers` set (a shorter run to iterate on), in a temporary file."""
    if layers is None:
        return path
    import tempfile

    with open(path, encoding="utf-8") as fh:
        raw = json.load(fh)
    raw["num_hidden_layers"] = layers
    name = os.path.basename(path).replace(".json", f"_{layers}layers.json")
    out = os.path.join(tempfile.mkdtemp(), name)
    with open(out, "w", encoding="utf-8") as fh:
        json.dump(raw, fh)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seq-len", type=int, default=None, help="default 2048 (64 with --quick)")
    parser.add_argument("--configs", default="7b,70b,405b", help="comma-separated, of " + ", ".join(CONFIGS))
    parser.add_argument("--repeats", type=int, default=3, help="bare/audit pairs per config, alternating (default 3)")
    parser.add_argument("--layers", type=int, default=None, help="override num_hidden_layers (a shorter run; no docs)")
    parser.add_argument("--quick", action="store_true", help="a 2-layer config, one pair, in this process; no docs")
    parser.add_argument("--no-docs", action="store_true", help="do not write docs/benchmarks.md")
    parser.add_argument("--side-by-side", type=int, metavar="N", help="70B: bare build + step vs the audit, N alternating repeats")
    parser.add_argument("--cpu", action="store_true", help="with --side-by-side: CPU seconds, not wall seconds")
    parser.add_argument("--parts", type=int, metavar="N", help="70B: the audit with parts switched off, N alternating repeats")
    args = parser.parse_args(argv)
    if args.parts:
        print(parts(with_layers(CONFIG, args.layers), args.seq_len or 2048, args.parts))
        return 0
    if args.side_by_side:
        print(side_by_side(with_layers(CONFIG, args.layers), args.seq_len or 2048, args.side_by_side, cpu=args.cpu))
        return 0
    if args.quick:
        results = [side_by_side_fresh(TINY, args.seq_len or 64, 1, run=measure)]
    else:
        results = [side_by_side_fresh(with_layers(CONFIGS[name], args.layers), args.seq_len or 2048, args.repeats)
                   for name in args.configs.split(",")]
    import benchdocs

    header = ["config", "seq", "audit total s", "of which imports s", "bare build + step s", "audit s (build, step, analysis)",
              "audit / bare", "audit / bare, CPU s", "ops recorded", "findings", "peak RSS MiB"]
    table = benchdocs.markdown_table(header, rows(results))
    print(table)
    for r in results:
        print(f"{r['config']}: bare {r['spread'][0]:.2f}-{r['spread'][1]:.2f} s, audit {r['spread'][2]:.2f}-{r['spread'][3]:.2f} s")
    if not (args.quick or args.no_docs or args.layers):
        benchdocs.write_block("fake-audit", "## Fake audit at scale (bench/audit_fake70b.py)",
                              benchdocs.stamp() + f"\n\nFakeTensorMode, bf16-mixed, batch 1. Per config, {args.repeats} bare and "
                              f"{args.repeats} audited runs alternating, each in a fresh process; medians. *bare*: build + forward "
                              "(bf16 autocast) + backward; *audit*: `audit_hf_config(fake=True)`, the same build and step recorded "
                              "and the report built; both after the same imports (transformers, the model's module, ampdoctor's "
                              "audit and rules), which *audit total* includes:\n\n" + table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
