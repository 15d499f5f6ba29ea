"""CPU RoPE benchmark: ampdoctor.nn.RotaryEmbedding against transformers' Llama RoPE, in the same run.

bf16 q and k of shape [batch, heads, seq, head_dim]; each timed call includes producing cos/sin from
position ids. Timings are medians of ``--repeat`` calls after warm-up (compilation happens in warm-up).

    .venv/bin/python bench/rope_bench.py [--batch 4 --heads 16 --seq 1024 --head-dim 128 --repeat 30] [--device cuda]
    .venv/bin/python bench/rope_bench.py --quick      # tiny shapes, eager only, seconds; no docs

The full run updates its block of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from typing import Callable

import torch
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

from ampdoctor.nn import RotaryEmbedding

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # benchdocs, when imported from a test
import benchdocs  # noqa: E402


def median_ms(variants: dict[str, Callable[[], object]], repeat: int, warmup: int, sync: Callable[[], None]) -> dict[str, float]:
    """Median milliseconds per variant; the variants take turns in every round so load drift hits all alike."""
    for fn in variants.values():
        for _ in range(warmup):
            fn()
    sync()
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeat):
        for name, fn in variants.items():
            start = time.perf_counter()
            fn()
            sync()
            times[name].append(time.perf_counter() - start)
    return {name: 1000 * statistics.median(t) for name, t in times.items()}


def naive_exact(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The straightforward exact version: upcast, chunk, cat, cast back (torchtune/Meta style)."""

    def one(x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        x1, x2 = xf.chunk(2, dim=-1)
        c, s = cos[:, None], sin[:, None]
        return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).to(x.dtype)

    return one(q), one(k)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--quick", action="store_true", help="q/k [1, 2, 64, 32], 3 repeats, no compiled variant; no docs")
    parser.add_argument("--no-docs", action="store_true", help="do not write docs/benchmarks.md")
    args = parser.parse_args(argv)
    if args.quick:
        args.batch, args.heads, args.seq, args.head_dim, args.repeat, args.warmup = 1, 2, 64, 32, 3, 1
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    b, h, s, d = args.batch, args.heads, args.seq, args.head_dim
    q = torch.randn(b, h, s, d, dtype=torch.bfloat16, device=device)
    k = torch.randn(b, h, s, d, dtype=torch.bfloat16, device=device)
    position_ids = torch.arange(s, device=device).expand(b, s)

    config = LlamaConfig(hidden_size=h * d, num_attention_heads=h, head_dim=d, max_position_embeddings=max(4096, s))
    hf_rope = LlamaRotaryEmbedding(config).to(device)

    def hf() -> object:
        cos, sin = hf_rope(q, position_ids)
        return apply_rotary_pos_emb(q, k, cos, sin)

    backends = ("eager",) if args.quick else ("compile", "eager")
    ours = {backend: RotaryEmbedding(d, max_position=max(4096, s), backend=backend).to(device) for backend in backends}
    start = time.perf_counter()
    with torch.inference_mode():
        if "compile" in ours:
            ours["compile"](q, k, position_ids)
            sync()
    first_call_s = time.perf_counter() - start

    def naive() -> object:
        cos, sin = ours["eager"].cos_sin(position_ids)
        return naive_exact(q, k, cos, sin)

    variants: dict[str, Callable[[], object]] = {"hf": hf, "naive-exact": naive}
    for backend, rope in ours.items():
        variants[f"ampdoctor-{backend}"] = lambda rope=rope: rope(q, k, position_ids)
    with torch.inference_mode():
        results = median_ms(variants, args.repeat, args.warmup, sync)

    where = torch.cuda.get_device_name() if device.type == "cuda" else platform.processor() or platform.machine()
    print(f"torch {torch.__version__}, {where}, {torch.get_num_threads()} threads, "
          f"q/k bf16 [{b}, {h}, {s}, {d}], median of {args.repeat}")
    if "compile" in ours:
        print(f"first ampdoctor-compile call (compilation included): {first_call_s:.1f} s")
    table = benchdocs.markdown_table(["variant", "ms", "vs HF"],
                                     [[name, f"{ms:.3f}", f"{ms / results['hf']:.2f}x"] for name, ms in results.items()])
    print(table)
    if not (args.quick or args.no_docs):
        benchdocs.write_block(f"rope-speed-{device.type}", f"## RoPE speed, {device.type} (bench/rope_bench.py)",
                              benchdocs.stamp() + f"\n\nq/k bf16 [{b}, {h}, {s}, {d}], median of {args.repeat}; first compiled "
                              f"call (compilation included) {first_call_s:.1f} s.\n\n" + table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
