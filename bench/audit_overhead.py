"""Overhead of a full audit of a bf16-mixed transformers Llama train step (random init): `--size tiny` is 4 layers,
512 wide, batch 4 x 256; `--size 1b` the TinyLlama 1.1B shape, batch 4 x 2048 (a GPU's size). The plain step, the
audited step, the same audit without its value watch, and a step after recording stopped (the audit still open, as
under `ampdoctor run` once --max-steps were recorded) are timed in the same run, interleaved.
Target: audited / plain <= 1.15; after recording stops, 1.00. `--every N --run-steps S` also times a whole run of S
steps sampled one in N (`audit(every=N)`, analysis included) against the same S steps plain (target <= 1.02x).

    .venv/bin/python bench/audit_overhead.py [--repeats 3] [--device cuda] [--size tiny|1b]   # updates docs/benchmarks.md
    .venv/bin/python bench/audit_overhead.py --quick                          # a 1-layer, 64-wide model; no docs
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch
import transformers

from ampdoctor.audit import audit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # benchdocs, when imported from a test
import benchdocs  # noqa: E402

FULL = dict(hidden_size=512, intermediate_size=1376, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=8,
            vocab_size=32000, max_position_embeddings=1024)
TINYLLAMA = dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32, num_key_value_heads=4,
                 vocab_size=32000, max_position_embeddings=2048)
QUICK = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=4,
             vocab_size=512, max_position_embeddings=128)


# size: (model shape, batch shape, what the docs call it)
SIZES = {"quick": (QUICK, (2, 32), "1-layer, 64-wide Llama, batch 2 x 32"),
         "tiny": (FULL, (4, 256), "4-layer, 512-wide Llama, batch 4 x 256"),
         "1b": (TINYLLAMA, (4, 2048), "TinyLlama 1.1B shape (22 layers, 2048 wide, GQA 32/4), batch 4 x 2048")}


def build(size: str, device: str) -> tuple[torch.nn.Module, torch.optim.Optimizer, torch.Tensor]:
    torch.manual_seed(0)
    shape, batch, _ = SIZES[size]
    config = transformers.LlamaConfig(**shape)
    model = transformers.LlamaForCausalLM(config).train().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, config.vocab_size, batch, device=device)
    return model, opt, ids


def step(model: torch.nn.Module, opt: torch.optim.Optimizer, ids: torch.Tensor) -> None:
    with torch.autocast(ids.device.type, dtype=torch.bfloat16):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    if ids.is_cuda:
        torch.cuda.synchronize()


def sampled_run(model: torch.nn.Module, opt: torch.optim.Optimizer, ids: torch.Tensor, every: int, steps: int) -> dict:
    """A whole run of `steps` under `audit(every=...)`, report built, against the same number of plain steps; the two
    runs alternate in halves (plain, audited, audited, plain) so that drift in the machine's load hits both alike."""
    half = max(steps // 2, 1)
    plain = audited = 0.0
    recorded = 0
    for order in (("plain", "audit"), ("audit", "plain")):
        for kind in order:
            t0 = time.perf_counter()
            if kind == "plain":
                for _ in range(half):
                    step(model, opt, ids)
                plain += time.perf_counter() - t0
            else:
                with audit("bf16-mixed", every=every) as a:
                    for _ in range(half):
                        step(model, opt, ids)
                audited += time.perf_counter() - t0
                recorded += len(a.recorder.recorded_steps)
    return {"steps": 2 * half, "recorded": recorded, "plain": plain, "audited": audited}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--size", choices=("quick", "tiny", "1b"), default="tiny",
                        help="quick: the 1-layer model of --quick, for a CPU whose bf16 matmuls are emulated (slow)")
    parser.add_argument("--quick", action="store_true", help="a 1-layer, 64-wide model, one repeat; no docs")
    parser.add_argument("--no-docs", action="store_true", help="do not write docs/benchmarks.md")
    parser.add_argument("--every", type=int, default=None, metavar="N", help="also time a run sampled one step in N")
    parser.add_argument("--run-steps", type=int, default=50, metavar="S", help="steps of that run (default 50)")
    args = parser.parse_args(argv)
    repeats = 1 if args.quick else args.repeats
    size = "quick" if args.quick else args.size
    model, opt, ids = build(size, args.device)
    step(model, opt, ids)  # warm-up
    plain, audited, analysis, no_values, after = [], [], [], [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        step(model, opt, ids)
        plain.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        a = audit("bf16-mixed", max_steps=1)
        a.__enter__()
        step(model, opt, ids)  # recorded: recording stops at its optimizer step
        t1 = time.perf_counter()
        step(model, opt, ids)  # the script going on while the audit is still open
        t2 = time.perf_counter()
        a.__exit__(None, None, None)
        t3 = time.perf_counter()
        audited.append(t1 - t0)
        after.append(t2 - t1)
        analysis.append(t3 - t2)
        findings = len(a.report.findings)
        # the same audit without the value watch (amax, overflow/underflow counts): what the watch itself costs
        t0 = time.perf_counter()
        with audit("bf16-mixed", watch_values=False):
            step(model, opt, ids)
            t1 = time.perf_counter()
        no_values.append(t1 - t0)
    p, q, r = statistics.median(plain), statistics.median(audited), statistics.median(analysis)
    v, w = statistics.median(no_values), statistics.median(after)
    sampled = sampled_run(model, opt, ids, args.every, 2 * args.every if args.quick else args.run_steps) if args.every else None
    print(f"{SIZES[size][2]}; torch {torch.__version__}, {torch.get_num_threads()} threads, median of {repeats}")
    table = benchdocs.markdown_table(
        ["device", "plain step s", "audited step s (recording)", "analysis s", "ratio", "ratio with analysis",
         "audited without value watch", "after recording stops", "findings"],
        [[args.device, f"{p:.3f}", f"{q:.3f}", f"{r:.3f}", f"{q / p:.3f}x", f"{(q + r) / p:.3f}x", f"{v / p:.3f}x", f"{w / p:.3f}x",
          findings]])
    if sampled is not None:
        table += "\n\n" + benchdocs.markdown_table(
            ["run", "steps", "recorded", "plain run s", "sampled audit run s (analysis included)", "ratio"],
            [[f"every {args.every}", sampled["steps"], sampled["recorded"], f"{sampled['plain']:.2f}", f"{sampled['audited']:.2f}",
              f"{sampled['audited'] / sampled['plain']:.3f}x"]])
    print(table)
    if not (args.quick or args.no_docs):
        name = f"audit-overhead-{args.device}" + ("" if size == "tiny" else f"-{size}")
        benchdocs.write_block(name, f"## Audit overhead, {args.device}, {size} (bench/audit_overhead.py)",
                              benchdocs.stamp() + f"\n\n{SIZES[size][2]}, bf16-mixed, median of {repeats} interleaved plain / audited / "
                              "audited-without-value-watch / after-recording-stopped steps (target <= 1.15x; after recording "
                              "stops, 1.00x):\n\n" + table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
