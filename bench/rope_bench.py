"""CPU RoPE benchmark: ampdoctor.nn.RotaryEmbedding against transformers' Llama RoPE, in the same run.

bf16 q and k of shape [batch, heads, seq, head_dim]; each timed call includes producing cos/sin from
position ids. Timings are medians of ``--repeat`` calls after warm-up (compilation happens in warm-up).

    .venv/bin/python bench/rope_bench.py [--batch 4 --heads 16 --seq 1024 --head-dim 128 --repeat 30]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from typing import Callable

import torch
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

from ampdoctor.nn import RotaryEmbedding


def median_ms(variants: dict[str, Callable[[], object]], repeat: int, warmup: int) -> dict[str, float]:
    """Median milliseconds per variant; the variants take turns in every round so load drift hits all alike."""
    for fn in variants.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeat):
        for name, fn in variants.items():
            start = time.perf_counter()
            fn()
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    b, h, s, d = args.batch, args.heads, args.seq, args.head_dim
    q = torch.randn(b, h, s, d, dtype=torch.bfloat16)
    k = torch.randn(b, h, s, d, dtype=torch.bfloat16)
    position_ids = torch.arange(s).expand(b, s)

    config = LlamaConfig(hidden_size=h * d, num_attention_heads=h, head_dim=d, max_position_embeddings=max(4096, s))
    hf_rope = LlamaRotaryEmbedding(config)

    def hf() -> object:
        cos, sin = hf_rope(q, position_ids)
        return apply_rotary_pos_emb(q, k, cos, sin)

    ours = {backend: RotaryEmbedding(d, max_position=max(4096, s), backend=backend) for backend in ("compile", "eager")}
    start = time.perf_counter()
    with torch.inference_mode():
        ours["compile"](q, k, position_ids)
    first_call_s = time.perf_counter() - start

    def naive() -> object:
        cos, sin = ours["eager"].cos_sin(position_ids)
        return naive_exact(q, k, cos, sin)

    variants: dict[str, Callable[[], object]] = {"hf": hf, "naive-exact": naive}
    for backend, rope in ours.items():
        variants[f"ampdoctor-{backend}"] = lambda rope=rope: rope(q, k, position_ids)
    with torch.inference_mode():
        results = median_ms(variants, args.repeat, args.warmup)

    print(f"torch {torch.__version__}, {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, "
          f"q/k bf16 [{b}, {h}, {s}, {d}], median of {args.repeat}")
    print(f"first ampdoctor-compile call (compilation included): {first_call_s:.1f} s")
    print(f"{'variant':<20} {'ms':>8} {'vs HF':>7}")
    for name, ms in results.items():
        print(f"{name:<20} {ms:8.2f} {ms / results['hf']:6.2f}x")


if __name__ == "__main__":
    main()
