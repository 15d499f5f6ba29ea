"""Fake audit of a Llama-3-70B config: forward + backward at seq 2048 on FakeTensorMode.

Target: <= 10 s and <= 1 GiB peak RSS on 2 cores. Also times a bare FakeTensorMode forward +
backward of the same model for comparison.

Run: .venv/bin/python bench/audit_fake70b.py [--seq-len 2048] [--bare]
"""

from __future__ import annotations

import argparse
import os
import resource
import time

import torch

CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "audit_llama70b_config.json")


def bare(seq_len: int) -> float:
    from torch._subclasses.fake_tensor import FakeTensorMode

    from ampdoctor.audit.hf import build_model, load_config
    from ampdoctor.policy import Policy

    config = load_config(CONFIG)
    with FakeTensorMode():
        model = build_model(config, Policy.parse("bf16-mixed"))
        ids = torch.randint(0, config.vocab_size, (1, seq_len))
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--bare", action="store_true", help="time a bare FakeTensorMode step instead of the audit")
    args = parser.parse_args()
    start = time.perf_counter()
    # Importing transformers and the model's config module is common to both runs and, on a machine
    # with a small page cache, the noisiest part: it is timed on its own (and still in the total).
    from ampdoctor.audit.hf import load_config

    load_config(CONFIG)
    imports = time.perf_counter() - start
    if args.bare:
        step = bare(args.seq_len)
        print(f"bare fake forward+backward: {step:.2f} s (build+step {time.perf_counter() - start:.2f} s, "
              f"of which imports+config {imports:.2f} s)")
    else:
        from ampdoctor.audit.hf import audit_hf_config

        a = audit_hf_config(CONFIG, fake=True, seq_len=args.seq_len, policy="bf16-mixed")
        total = time.perf_counter() - start
        print(f"fake audit (build + forward + backward + analysis): {total:.2f} s (of which imports+config {imports:.2f} s), "
              f"{len(a.recorder.records)} ops recorded, {len(a.report.findings)} findings, errors={list(a.report.errors)}")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS: {rss:.0f} MiB")


if __name__ == "__main__":
    main()
