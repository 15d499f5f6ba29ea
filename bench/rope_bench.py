"""RoPE benchmark: ampdoctor.nn.RotaryEmbedding against transformers' Llama RoPE, in the same run.

CPU (default): bf16 q and k of shape [batch, heads, seq, head_dim]; each timed call includes producing cos/sin
from position ids. Timings are medians of ``--repeat`` calls after warm-up (compilation happens in warm-up).

    .venv/bin/python bench/rope_bench.py [--batch 4 --heads 16 --seq 1024 --head-dim 128 --repeat 30]

CUDA (``--device cuda``): the issue-14 shapes by default, bf16 q [4, 32, 4096, 128] and k [4, 8, 4096, 128],
base 5e5, position ids given; ampdoctor's Triton kernel against HF Llama rotary and, when importable,
Liger's and flash-attn's Triton rotary, timed with ``triton.testing.do_bench``; bandwidth as a fraction of
a device-to-device copy of the same bytes timed in the same run; max abs error against a float64 rotation.

    .venv/bin/python bench/rope_bench.py --device cuda

    .venv/bin/python bench/rope_bench.py --quick      # CPU, tiny shapes, eager only, seconds; no docs

A full run updates its block of docs/benchmarks.md (``--no-docs``: print only).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Callable

import torch
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

from ampdoctor.nn import RotaryEmbedding

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # benchdocs, when imported from a test
import benchdocs  # noqa: E402


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


@dataclass(frozen=True)
class Variant:
    name: str
    what: str
    fn: Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


@dataclass(frozen=True)
class Row:
    variant: Variant
    fwd_ms: float
    fwd_bwd_ms: float | None
    error: float


def exact_rotation(x: torch.Tensor, positions: torch.Tensor, inv_freq: torch.Tensor, scale: float) -> torch.Tensor:
    """float64 half-layout rotation of [b, h, s, d] by ``positions [b, s] * inv_freq`` (on x's device)."""
    x = x.double()
    angles = positions.double()[:, None, :, None] * inv_freq.to(x.device, torch.float64)
    cos, sin = angles.cos() * scale, angles.sin() * scale
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def peer_variants(hf_rope: torch.nn.Module, q: torch.Tensor, position_ids: torch.Tensor) -> list[Variant]:
    """Liger's and flash-attn's Triton rotary, when importable, with their tables precomputed outside the timing."""
    variants = []
    try:
        from liger_kernel.transformers.rope import liger_rotary_pos_emb
    except ImportError:
        pass
    else:
        hf_cos, hf_sin = hf_rope(q, position_ids)
        variants.append(Variant("liger", "Liger Triton rope, HF's bf16 cos/sin precomputed",
                                lambda q, k: liger_rotary_pos_emb(q, k, hf_cos, hf_sin)))
    try:
        from flash_attn.layers.rotary import apply_rotary_emb
    except ImportError:
        pass
    else:
        seq = q.shape[2]
        angles = torch.arange(seq, device=q.device, dtype=torch.float32)[:, None] * hf_rope.inv_freq.float()[None]
        fa_cos, fa_sin = angles.cos().to(q.dtype), angles.sin().to(q.dtype)

        def flash(q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            # [b, s, h, d] views of the [b, h, s, d] tensors; two launches (q, then k).
            return (apply_rotary_emb(q.transpose(1, 2), fa_cos, fa_sin).transpose(1, 2),
                    apply_rotary_emb(k.transpose(1, 2), fa_cos, fa_sin).transpose(1, 2))

        variants.append(Variant("flash-attn", "flash-attn Triton rotary, bf16 [seq, d/2] tables, positions 0..s-1",
                                flash))
    return variants


def compare(q: torch.Tensor, k: torch.Tensor, position_ids: torch.Tensor, base: float,
            timer: Callable[..., float], backend: str = "auto") -> tuple[list[Row], float, float]:
    """Rows for every variant, the copy time of the same bytes, and the bf16 rounding floor of the exact result.
    ``timer(fn, grad_to_none=None)`` returns milliseconds (``triton.testing.do_bench`` on CUDA)."""
    b, hq, s, d = q.shape
    config = LlamaConfig(hidden_size=hq * d, num_attention_heads=hq, num_key_value_heads=k.shape[1], head_dim=d,
                         max_position_embeddings=max(4096, s), rope_parameters={"rope_type": "default", "rope_theta": base})
    hf_rope = LlamaRotaryEmbedding(config).to(q.device)

    def hf(q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        cos, sin = hf_rope(q, position_ids)
        return apply_rotary_pos_emb(q, k, cos, sin)

    ours = RotaryEmbedding(d, base=base, max_position=max(4096, s), backend=backend).to(q.device)
    variants = [
        Variant("hf", "HF Llama rotary, cos/sin production included", hf),
        Variant("ampdoctor", "Triton kernel, fp32 rows gathered by position ids", lambda q, k: ours(q, k, position_ids)),
        Variant("ampdoctor-no-ids", "Triton kernel, positions 0..s-1", lambda q, k: ours(q, k)),
        *peer_variants(hf_rope, q, position_ids),
    ]
    exact_q = exact_rotation(q, position_ids, ours.inv_freq, ours.attention_scaling)
    exact_k = exact_rotation(k, position_ids, ours.inv_freq, ours.attention_scaling)
    floor = max(float((e.to(q.dtype).double() - e).abs().max()) for e in (exact_q, exact_k))
    source = torch.cat((q.flatten(), k.flatten()))
    target = torch.empty_like(source)
    copy_ms = timer(lambda: target.copy_(source))
    rows = []
    for variant in variants:
        with torch.no_grad():
            out_q, out_k = variant.fn(q, k)
            error = max(float((out.double() - e).abs().max()) for out, e in ((out_q, exact_q), (out_k, exact_k)))
            del out_q, out_k
            fwd_ms = timer(lambda variant=variant: variant.fn(q, k))
        rows.append(Row(variant, fwd_ms, fwd_bwd_ms(variant, q, k, timer), error))
    return rows, copy_ms, floor


def fwd_bwd_ms(variant: Variant, q: torch.Tensor, k: torch.Tensor, timer: Callable[..., float]) -> float | None:
    q_leaf, k_leaf = q.detach().requires_grad_(), k.detach().requires_grad_()
    grads = (torch.randn_like(q), torch.randn_like(k))

    def step() -> None:
        torch.autograd.backward(variant.fn(q_leaf, k_leaf), grads)

    try:
        return timer(step, grad_to_none=[q_leaf, k_leaf])
    except RuntimeError:  # a peer without a backward
        return None


def cuda_main(args: argparse.Namespace) -> None:
    import triton
    import triton.testing

    torch.manual_seed(0)
    device = torch.device("cuda")
    b, s, d = args.batch or 4, args.seq or 4096, args.head_dim
    hq, hk = args.heads or 32, args.kv_heads or 8
    q = torch.randn(b, hq, s, d, device=device, dtype=torch.bfloat16)
    k = torch.randn(b, hk, s, d, device=device, dtype=torch.bfloat16)
    position_ids = torch.arange(s, device=device).expand(b, s)

    def timer(fn: Callable[[], object], grad_to_none: list[torch.Tensor] | None = None) -> float:
        return float(triton.testing.do_bench(fn, grad_to_none=grad_to_none, return_mode="median"))

    rows, copy_ms, floor = compare(q, k, position_ids, args.base or 500000.0, timer)
    moved = 2 * (q.numel() + k.numel()) * q.element_size()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}; bf16 q {list(q.shape)}, "
          f"k {list(k.shape)}, base {args.base or 500000.0:g}, position ids given; do_bench medians")
    print(f"bytes moved (read + write q and k): {moved / 1e6:.1f} MB; device-to-device copy of the same bytes: "
          f"{1000 * copy_ms:.0f} us = {moved / copy_ms / 1e6:.0f} GB/s; bf16 rounding floor of the exact rotation: {floor:.3g}")
    table = benchdocs.markdown_table(
        ["variant", "fwd us", "GB/s", "of copy", "fwd+bwd us", "max abs error vs float64", "what"],
        [[row.variant.name, f"{1000 * row.fwd_ms:.0f}", f"{moved / row.fwd_ms / 1e6:.0f}", f"{copy_ms / row.fwd_ms:.0%}",
          f"{1000 * row.fwd_bwd_ms:.0f}" if row.fwd_bwd_ms is not None else "-", f"{row.error:.3g}", row.variant.what]
         for row in rows])
    print(table)
    if not args.no_docs:
        benchdocs.write_block("rope-speed-cuda", "## RoPE speed, cuda (bench/rope_bench.py --device cuda)",
                              benchdocs.stamp() + f"\n\n{torch.cuda.get_device_name()}, bf16 q {list(q.shape)}, k {list(k.shape)}; "
                              f"copy of the same bytes {1000 * copy_ms:.0f} us; bf16 floor {floor:.3g}.\n\n" + table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--batch", type=int, default=None, help="default 4")
    parser.add_argument("--heads", type=int, default=None, help="default 16 (cpu), 32 (cuda)")
    parser.add_argument("--kv-heads", type=int, default=None, help="cuda only, default 8")
    parser.add_argument("--seq", type=int, default=None, help="default 1024 (cpu), 4096 (cuda)")
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--base", type=float, default=None, help="cuda only, default 5e5")
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--quick", action="store_true", help="cpu, q/k [1, 2, 64, 32], 3 repeats, no compiled variant; no docs")
    parser.add_argument("--no-docs", action="store_true", help="do not write docs/benchmarks.md")
    args = parser.parse_args(argv)
    if args.device == "cuda":
        cuda_main(args)
        return 0
    args.batch, args.heads, args.seq = args.batch or 4, args.heads or 16, args.seq or 1024
    if args.quick:
        args.batch, args.heads, args.seq, args.head_dim, args.repeat, args.warmup = 1, 2, 64, 32, 3, 1
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

    backends = ("eager",) if args.quick else ("compile", "eager")
    ours = {backend: RotaryEmbedding(d, max_position=max(4096, s), backend=backend) for backend in backends}
    start = time.perf_counter()
    with torch.inference_mode():
        if "compile" in ours:
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
    if "compile" in ours:
        print(f"first ampdoctor-compile call (compilation included): {first_call_s:.1f} s")
    table = benchdocs.markdown_table(["variant", "ms", "vs HF"],
                                     [[name, f"{ms:.3f}", f"{ms / results['hf']:.2f}x"] for name, ms in results.items()])
    print(table)
    if not (args.quick or args.no_docs):
        benchdocs.write_block("rope-speed-cpu", "## RoPE speed, cpu (bench/rope_bench.py)",
                              benchdocs.stamp() + f"\n\nq/k bf16 [{b}, {h}, {s}, {d}], median of {args.repeat}; first compiled "
                              f"call (compilation included) {first_call_s:.1f} s.\n\n" + table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
