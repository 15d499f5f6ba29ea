"""Overhead of a full audit on a 4-layer, 512-wide Llama (transformers, random init), bf16-mixed
train step on CPU, batch 4 x 256; the plain and the audited step are timed in the same run,
interleaved. Target: audited / plain <= 1.15.

Run: .venv/bin/python bench/audit_overhead.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import transformers

from ampdoctor.audit import audit


def build() -> tuple[torch.nn.Module, torch.optim.Optimizer, torch.Tensor]:
    torch.manual_seed(0)
    config = transformers.LlamaConfig(hidden_size=512, intermediate_size=1376, num_hidden_layers=4, num_attention_heads=8,
                                      num_key_value_heads=8, vocab_size=32000, max_position_embeddings=1024)
    model = transformers.LlamaForCausalLM(config).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, config.vocab_size, (4, 256))
    return model, opt, ids


def step(model: torch.nn.Module, opt: torch.optim.Optimizer, ids: torch.Tensor) -> None:
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    model, opt, ids = build()
    step(model, opt, ids)  # warm-up
    plain, audited, analysis, no_values = [], [], [], []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        step(model, opt, ids)
        plain.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        a = audit("bf16-mixed")
        a.__enter__()
        step(model, opt, ids)
        t1 = time.perf_counter()
        a.__exit__(None, None, None)
        t2 = time.perf_counter()
        audited.append(t1 - t0)
        analysis.append(t2 - t1)
        findings = len(a.report.findings)
        # the same audit without the value watch (amax, overflow/underflow counts): what the watch itself costs
        t0 = time.perf_counter()
        with audit("bf16-mixed", watch_values=False):
            step(model, opt, ids)
            t1 = time.perf_counter()
        no_values.append(t1 - t0)
    p, q, r = statistics.median(plain), statistics.median(audited), statistics.median(analysis)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"plain step {p:.3f} s, audited step {q:.3f} s (recording) + {r:.3f} s analysis")
    print(f"overhead recording {q / p:.3f}x, with analysis {(q + r) / p:.3f}x; {findings} findings")
    v = statistics.median(no_values)
    print(f"audited step without the value watch {v:.3f} s ({v / p:.3f}x): the watch adds {(q - v) / p:.1%} of a plain step")


if __name__ == "__main__":
    main()
