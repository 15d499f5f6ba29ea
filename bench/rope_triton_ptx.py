"""Compile the rotary Triton kernel for a CUDA architecture without a GPU and show what its memory accesses became.

Triton's wheel ships ptxas, so the full compile (Triton IR -> PTX -> cubin) runs on a CPU-only machine. This
checks what the interpreter cannot: that the kernel compiles natively, and that its loads and stores are
16-byte vectors (``ld.global.v4.b32``) rather than 2-byte scalars. Strides and alignments are given the
values the runtime specialises on for contiguous bf16 q/k (unit last stride, others divisible by 16).

    .venv/bin/python bench/rope_triton_ptx.py [--arch 90]
"""

from __future__ import annotations

import argparse
import os
import re
import time

# The kernel must be a compiled JITFunction, not the interpreter's stand-in.
os.environ.pop("TRITON_INTERPRET", None)

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from ampdoctor.nn.rope_triton import _rotary_qk_kernel  # noqa: E402

POINTERS = {"q_ptr": "*bf16", "k_ptr": "*bf16", "qo_ptr": "*bf16", "ko_ptr": "*bf16", "cos_ptr": "*fp32",
            "sin_ptr": "*fp32", "pos_ptr": "*i64", "cu_ptr": "*i32"}
UNIT_STRIDES = ("sqd", "sqod", "skd", "skod", "sps")
ALIGNED = ("spb", "stb", "sqb", "sqh", "sqs", "sqob", "sqoh", "sqos", "skb", "skh", "sks", "skob", "skoh", "skos", "sts")


def compile_kernel(arch: int, interleaved: bool, head_dim: int = 128) -> object:
    names = _rotary_qk_kernel.arg_names
    half = head_dim // 2
    constants = dict(HALF=half, REST=0, HALF_PAD=triton.next_power_of_2(half), REST_PAD=1, BLOCK_S=2048 // half,
                     INTERLEAVED=interleaved, CONJUGATE=False, HAS_POS=True, VARLEN=False, COPY_REST=False,
                     MANUAL_BF16=False, **dict.fromkeys(UNIT_STRIDES, 1))
    signature = {n: "constexpr" if n in constants else POINTERS.get(n, "i32") for n in names}
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in (*POINTERS, *ALIGNED)}
    source = ASTSource(_rotary_qk_kernel, signature, constexprs=constants, attrs=attrs)
    return triton.compile(source, target=GPUTarget("cuda", arch, 32), options={"num_warps": 4})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", type=int, default=90, help="compute capability as an int (90: H100)")
    args = parser.parse_args()
    print(f"triton {triton.__version__}, sm_{args.arch}, bf16 q/k, head_dim 128, position ids")
    for interleaved in (False, True):
        start = time.perf_counter()
        ptx = compile_kernel(args.arch, interleaved).asm["ptx"]
        loads = sorted(set(re.findall(r"ld\.global[.\w]*", ptx)))
        stores = sorted(set(re.findall(r"st\.global[.\w]*", ptx)))
        shared = len(re.findall(r"(?:ld|st)\.shared", ptx))
        print(f"{'interleaved' if interleaved else 'half':<12} loads {loads}  stores {stores}  "
              f"shared-memory ops {shared}  ({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
