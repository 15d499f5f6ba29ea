"""Does a bf16 RoPE table cost validation loss? fp32 vs bf16 vs ampdoctor tables, paired by seed.

Incident 2 (modded-nanogpt #39) reported val loss 3.2783 with fp32 cos/sin against 3.2833 with
``freqs.cos().bfloat16()``: 0.005 nats, from one run each. That change did two things at once: it rounded the
table to bf16, and it made the rotation's products and sums bf16. The variants of bench/gpt/model.py separate
them (fp32, bf16-table = table only, bf16-math = arithmetic only, bf16 = both, ampdoctor = the component).

Every seed trains every variant from the same initial weights on the same batches, so the seed-to-seed spread
cancels in the paired differences (variant - fp32, per seed); the 95% intervals use the t distribution. The
final weights of every run are also evaluated under every table ("swap"): that is the table's direct effect on
the loss of a fixed model, without training noise.

    .venv/bin/python bench/rope_table_experiment.py                 # the CPU run in docs/benchmarks.md (~10 min)
    .venv/bin/python bench/rope_table_experiment.py --quick         # seconds: checks the pipeline, writes no docs
    .venv/bin/python bench/rope_table_experiment.py --device cuda --seeds 8 --steps 1500 --seq-len 2048 ...
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "gpt"))
import benchdocs  # noqa: E402

VARIANTS = ("fp32", "bf16", "bf16-table", "bf16-math", "ampdoctor")
EFFECT = 0.005  # nats: incident 2's reported gap (3.2833 - 3.2783)

# Two-sided 95% (0.975) and 80% power (0.80) quantiles of Student's t for 1..30 degrees of freedom.
T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
T80 = (1.376, 1.061, 0.978, 0.941, 0.920, 0.906, 0.896, 0.889, 0.883, 0.879, 0.876, 0.873, 0.870, 0.868, 0.866,
       0.865, 0.863, 0.862, 0.861, 0.860, 0.859, 0.858, 0.858, 0.857, 0.856, 0.856, 0.855, 0.855, 0.854, 0.854)


def t_quantile(p: float, df: int) -> float:
    """Student's t quantile for p in {0.975, 0.8}: tabulated to df 30, Cornish-Fisher beyond (error < 1e-3)."""
    table = {0.975: T975, 0.8: T80}[p]
    if df <= len(table):
        return table[df - 1]
    z = statistics.NormalDist().inv_cdf(p)
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def mean_ci(values: list[float]) -> tuple[float, float, float]:
    """(mean, sample std, half-width of the 95% t interval of the mean)."""
    n = len(values)
    mean = statistics.fmean(values)
    std = statistics.stdev(values) if n > 1 else float("nan")
    return mean, std, t_quantile(0.975, n - 1) * std / math.sqrt(n) if n > 1 else float("nan")


def seeds_to_resolve(std: float, effect: float = EFFECT) -> tuple[int, int]:
    """Seeds (pairs) for (a) a 95% half-width below ``effect``, (b) 80% power to find ``effect`` at 5% (two-sided)."""
    def first(condition) -> int:
        n = 2
        while not condition(n) and n < 100_000:
            n += 1
        return n
    half_width = first(lambda n: t_quantile(0.975, n - 1) * std / math.sqrt(n) < effect)
    power = first(lambda n: (t_quantile(0.975, n - 1) + t_quantile(0.8, n - 1)) * std / math.sqrt(n) <= effect)
    return half_width, power


# --- running ------------------------------------------------------------------------------------------

def train_argv(args: argparse.Namespace, variant: str, seed: int) -> list[str]:
    argv = ["--rope-table", variant, "--seed", str(seed), "--device", args.device, "--policy", args.policy,
            "--steps", str(args.steps), "--eval-every", str(args.steps), "--log-every", str(10**9), "--eval-swap"]
    for name in ("n_layer", "n_head", "d_model", "seq_len", "batch_size", "eval_windows", "max_files", "warmup", "threads"):
        value = getattr(args, name)
        if value is not None:
            argv += ["--" + name.replace("_", "-"), str(value)]
    return argv + (["--tiny"] if args.quick else [])


def run_one(argv: list[str]) -> dict:
    """One training run of bench/gpt/train.py, in this process (its log goes nowhere)."""
    import torch
    import train

    args = train.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    with contextlib.redirect_stdout(io.StringIO()):
        return train.run(args)


def run_all(args: argparse.Namespace) -> dict[tuple[str, int], dict]:
    """Every (variant, seed), seed-major so that the variants of one seed run close together in time."""
    jobs = [(v, s) for s in range(args.seed0, args.seed0 + args.seeds) for v in args.variants]
    argvs = [train_argv(args, v, s) for v, s in jobs]
    if args.jobs == 1:
        results = []
        for (v, s), argv in zip(jobs, argvs):
            results.append(run_one(argv))
            print(f"  {v:<10} seed {s}: val {results[-1]['val']:.4f}", flush=True)
    else:
        with ProcessPoolExecutor(args.jobs, mp_context=get_context("spawn")) as pool:
            results = list(pool.map(run_one, argvs))
    return dict(zip(jobs, results))


# --- analysis -----------------------------------------------------------------------------------------

def long_bucket(summary: dict) -> tuple[str, float]:
    name = list(summary["buckets"])[-1]
    return name, summary["buckets"][name]


def tables(args: argparse.Namespace, runs: dict[tuple[str, int], dict]) -> tuple[str, list[float]]:
    """The markdown tables of the result, and the std of each paired difference against fp32."""
    seeds = sorted({s for _, s in runs})
    bucket = long_bucket(runs[(args.variants[0], seeds[0])])[0]
    per_variant = []
    for v in args.variants:
        vals = [runs[(v, s)]["val"] for s in seeds]
        longs = [long_bucket(runs[(v, s)])[1] for s in seeds]
        speed = statistics.median(runs[(v, s)]["tokens_per_s"] or 0 for s in seeds)
        m, sd, _ = mean_ci(vals)
        ml, sdl, _ = mean_ci(longs)
        per_variant.append([v, f"{m:.4f} ± {sd:.4f}", f"{ml:.4f} ± {sdl:.4f}", " ".join(f"{x:.4f}" for x in vals), f"{speed:,.0f}"])
    out = ["Final validation loss (nats/byte), mean ± sample std over seeds " + ", ".join(map(str, seeds)) + ":", "",
           benchdocs.markdown_table(["--rope-table", "val loss", f"positions {bucket}", "per seed", "tokens/s (median)"],
                                    per_variant), ""]
    diff_rows, stds = [], []
    reference = "fp32"
    for v in args.variants:
        if v == reference:
            continue
        for label, key in (("all positions", None), (f"positions {bucket}", bucket)):
            def value(variant: str, seed: int) -> float:
                summary = runs[(variant, seed)]
                return summary["val"] if key is None else summary["buckets"][key]
            diffs = [value(v, s) - value(reference, s) for s in seeds]
            m, sd, hw = mean_ci(diffs)
            if key is None:
                stds.append(sd)
            verdict = "resolved" if abs(m) > hw else "not resolved"
            diff_rows.append([f"{v} − fp32", label, f"{m:+.4f}", f"{sd:.4f}", f"[{m - hw:+.4f}, {m + hw:+.4f}]", verdict])
    out += ["Paired differences of the trained runs (same seed: same initial weights and batches), 95% t interval:", "",
            benchdocs.markdown_table(["difference", "loss over", "mean", "std of differences", "95% CI", "0 outside CI?"],
                                     diff_rows), ""]
    swap_rows = []
    for v in args.variants:
        if v == reference:
            continue
        diffs = [runs[(reference, s)]["swap"][v]["loss"] - runs[(reference, s)]["swap"][reference]["loss"] for s in seeds]
        longs = [runs[(reference, s)]["swap"][v]["buckets"][bucket] - runs[(reference, s)]["swap"][reference]["buckets"][bucket]
                 for s in seeds]
        m, sd, hw = mean_ci(diffs)
        ml, _, hwl = mean_ci(longs)
        swap_rows.append([f"{v} − fp32", f"{m:+.6f} [{m - hw:+.6f}, {m + hw:+.6f}]", f"{ml:+.6f} [{ml - hwl:+.6f}, {ml + hwl:+.6f}]"])
    out += ["Direct effect of the table (\"swap\"): the fp32-trained weights of each seed evaluated with each table, "
            "difference to fp32, mean and 95% CI over seeds:", "",
            benchdocs.markdown_table(["table at evaluation", "all positions", f"positions {bucket}"], swap_rows)]
    return "\n".join(out), stds


def estimate(stds: list[float], variants: list[str]) -> str:
    """How many seeds an effect of incident 2's size would need, from the measured paired spread."""
    lines = []
    for v, sd in zip([v for v in variants if v != "fp32"], stds):
        if not sd > 0:
            continue
        half_width, power = seeds_to_resolve(sd)
        lines.append(f"- {v} − fp32: paired std {sd:.4f} → {half_width} seeds for a 95% interval narrower than "
                     f"±{EFFECT}, {power} seeds for 80% power to detect a true {EFFECT} gap.")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="tiny model, 2 seeds, 3 variants, a few steps; no docs")
    p.add_argument("--variants", nargs="+", choices=VARIANTS, default=None)
    p.add_argument("--seeds", type=int, default=None, help="number of seeds (default 3; 2 with --quick)")
    p.add_argument("--seed0", type=int, default=0)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--policy", default="bf16-mixed")
    p.add_argument("--steps", type=int, default=None)
    for name in ("n_layer", "n_head", "d_model", "seq_len", "batch_size", "eval_windows", "max_files", "warmup"):
        p.add_argument("--" + name.replace("_", "-"), type=int, default=None)
    p.add_argument("--jobs", type=int, default=None, help="runs in parallel (separate processes; default 2, 1 with --quick); "
                   "1 runs them in this process")
    p.add_argument("--threads", type=int, default=1, help="torch threads per run")
    p.add_argument("--no-docs", action="store_true", help="do not write docs/benchmarks.md")
    args = p.parse_args(argv)
    # The CPU default: ~10 minutes on 2 shared cores. Context 512 (positions 256-512 have their own bucket);
    # bf16 vs bf16-table isolates the arithmetic, bf16-table vs fp32 the table (bf16-math on request).
    defaults = (dict(variants=["fp32", "bf16", "ampdoctor"], seeds=2, steps=3, jobs=1, seq_len=64, eval_windows=2)
                if args.quick else
                dict(variants=["fp32", "bf16", "bf16-table", "ampdoctor"], seeds=3, steps=120, jobs=2, n_layer=2, n_head=2,
                     d_model=64, seq_len=512, batch_size=4, eval_windows=16, warmup=20))
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    start = time.perf_counter()
    print(f"{len(args.variants)} variants x {args.seeds} seeds, {args.steps} steps, seq {args.seq_len}, {args.jobs} job(s)",
          flush=True)
    runs = run_all(args)
    body, stds = tables(args, runs)
    wall = time.perf_counter() - start
    first = next(iter(runs.values()))
    setup = (f"Model {first['config']['n_layer']} layers × {first['config']['d_model']} ({first['config']['n_head']} heads), "
             f"seq {first['config']['seq_len']}, batch {first['batch_size']}, {first['steps']} steps of AdamW (lr {first['lr']}, "
             f"warm-up then cosine to 0), policy {first['policy']}, corpus {first['corpus']} "
             f"(CPython {first['python']} standard library, bytes).")
    text = "\n\n".join([setup, body, "Seeds needed for an effect of incident 2's size (0.005 nats), from the measured spread:",
                        estimate(stds, args.variants)])
    print(text)
    if not (args.quick or args.no_docs):
        benchdocs.write_block("rope-table", "## RoPE table precision experiment (bench/rope_table_experiment.py)",
                              benchdocs.stamp(wall) + "\n\n" + text)
        print(f"\nwrote {benchdocs.DOCS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
