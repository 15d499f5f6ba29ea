"""Train the byte-level GPT of model.py on the Python standard library of this machine.

    python bench/gpt/train.py --tiny                                   # seconds, CPU smoke run
    python bench/gpt/train.py --rope-table bf16 --seq-len 1024 --steps 2000 --seed 1
    torchrun --nproc-per-node 2 bench/gpt/train.py --tiny --steps 3 --device cpu     # DDP (gloo on CPU)
    torchrun --nproc-per-node 8 bench/gpt/train.py --device cuda ...                 # DDP (nccl on GPU)

Data: every ``.py`` file of ``sysconfig.get_paths()["stdlib"]`` (site-packages excluded) as bytes. The
train/val split is by file and fixed (a hash of the file's relative path), so every seed and every variant is
evaluated on the same text; ``--seed`` sets the initial weights and the order of training windows. The batch of
each step is drawn from one generator shared by all ranks and sliced per rank, so a DDP run sees the same
data as a single process.

Evaluation: fixed, evenly spaced validation windows of ``--seq-len`` bytes (no randomness), loss reported
overall and by position bucket, because RoPE table errors depend on the position. ``--eval-swap`` also
evaluates the final weights under every RoPE variant (the direct effect of the table, without training noise).
Rank 0 prints train loss, val loss and tokens/s; ``--json-out`` writes the run's summary as JSON.

`run(parse_args([...]))` is the same run in-process (bench/rope_table_experiment.py uses it): the corpus is
read once per process.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import math
import os
import platform
import sys
import sysconfig
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script: model.py sits next to this file
from model import GPT, ROPE_TABLES, GPTConfig, token_losses  # noqa: E402

from ampdoctor.policy import Policy  # noqa: E402

VAL_PERCENT = 10
# --tiny: a model, a context and a slice of the data that run in seconds on one CPU core.
TINY = dict(n_layer=2, n_head=2, d_model=64, seq_len=128, batch_size=4, steps=20, eval_every=10, eval_windows=4,
            max_files=60, warmup=2)
FULL = dict(n_layer=4, n_head=4, d_model=256, seq_len=1024, batch_size=16, steps=1000, eval_every=250, eval_windows=64,
            max_files=0, warmup=50)


# --- data ---------------------------------------------------------------------------------------------

def stdlib_files() -> list[Path]:
    """The standard library's .py files, sorted; site-packages is what was installed, not the stdlib."""
    root = Path(sysconfig.get_paths()["stdlib"])
    return sorted(p for p in root.rglob("*.py") if not {"site-packages", "dist-packages"} & set(p.parts))


def is_val(relpath: str) -> bool:
    """A fixed split by file: the same files are validation files for every seed and every run."""
    return int(hashlib.sha1(relpath.encode()).hexdigest(), 16) % 100 < VAL_PERCENT


@dataclass(frozen=True)
class Corpus:
    train: torch.Tensor  # uint8 byte streams, files joined by a NUL byte
    val: torch.Tensor
    fingerprint: str  # which files and bytes: runs are comparable only on the same corpus
    files: tuple[int, int]


@functools.lru_cache(maxsize=2)
def load_corpus(max_files: int = 0) -> Corpus:
    root = Path(sysconfig.get_paths()["stdlib"])
    parts: dict[bool, list[bytes]] = {True: [], False: []}
    digest = hashlib.sha1()
    files = stdlib_files()
    if max_files:  # --tiny: a deterministic slice that still has both train and val files
        files = files[:: max(1, len(files) // max_files)]
    for path in files:
        rel = path.relative_to(root).as_posix()
        data = path.read_bytes()
        parts[is_val(rel)].append(data)
        digest.update(rel.encode() + len(data).to_bytes(8, "little"))
    def stream(chunks: list[bytes]) -> torch.Tensor:
        return torch.frombuffer(bytearray(b"\0".join(chunks)), dtype=torch.uint8)
    return Corpus(stream(parts[False]), stream(parts[True]), digest.hexdigest()[:12], (len(parts[False]), len(parts[True])))


def train_batch(stream: torch.Tensor, gen: torch.Generator, batch: int, seq_len: int, rank: int, world: int
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's slice of the step's global batch of random windows (inputs, next-byte targets)."""
    starts = torch.randint(0, len(stream) - seq_len - 1, (batch,), generator=gen)
    mine = starts[rank * batch // world:(rank + 1) * batch // world]
    windows = torch.stack([stream[s:s + seq_len + 1] for s in mine.tolist()]).long()
    return windows[:, :-1], windows[:, 1:]


def val_windows(stream: torch.Tensor, count: int, seq_len: int) -> torch.Tensor:
    """``count`` windows evenly spaced over the validation text: the same for every run."""
    starts = torch.linspace(0, len(stream) - seq_len - 2, count).long()
    return torch.stack([stream[s:s + seq_len + 1] for s in starts.tolist()]).long()


def position_buckets(seq_len: int) -> list[tuple[int, int]]:
    """[0, 64), [64, 256), [256, 1024), ... up to seq_len: the long positions get their own numbers."""
    edges, edge = [0], 64
    while edge < seq_len:
        edges.append(edge)
        edge *= 4
    edges.append(seq_len)
    return list(zip(edges[:-1], edges[1:]))


# --- evaluation ---------------------------------------------------------------------------------------

@torch.no_grad()
def evaluate(model: torch.nn.Module, windows: torch.Tensor, batch: int, policy: Policy, device: str) -> dict:
    """Mean validation loss overall and per position bucket; ranks split the windows and sum."""
    rank, world = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
    seq_len = windows.shape[1] - 1
    per_position = torch.zeros(seq_len, dtype=torch.float64, device=device)
    mine = windows[rank::world]
    model.eval()
    for i in range(0, len(mine), batch):
        w = mine[i:i + batch].to(device)
        with policy.autocast(device.split(":")[0]):
            losses = token_losses(model, w[:, :-1], w[:, 1:])
        per_position += losses.double().sum(0)
    model.train()
    if world > 1:
        dist.all_reduce(per_position)
    per_position = (per_position / len(windows)).cpu()
    buckets = {f"{a}-{b}": per_position[a:b].mean().item() for a, b in position_buckets(seq_len)}
    return {"loss": per_position.mean().item(), "buckets": buckets}


# --- training -----------------------------------------------------------------------------------------

def learning_rate(step: int, args: argparse.Namespace) -> float:
    """Linear warm-up, then cosine decay to zero: the final loss is read at lr ~ 0, where it moves least."""
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    progress = (step - args.warmup) / max(1, args.steps - args.warmup)
    return args.lr * 0.5 * (1 + math.cos(math.pi * progress))


def make_optimizer(model: torch.nn.Module, args: argparse.Namespace) -> torch.optim.Optimizer:
    # Weight decay on matrices only; norms (and nothing else here) are exempt.
    decay = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": args.weight_decay}, {"params": other, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95), fused=args.device == "cuda")


def train_step(ddp: torch.nn.Module, model: torch.nn.Module, optimizer: torch.optim.Optimizer, scaler, policy: Policy,
               device_type: str, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """One optimizer step on (x, y) under the policy's autocast; returns the (detached) mean loss."""
    with policy.autocast(device_type):
        loss = token_losses(ddp, x, y).mean()
    (scaler.scale(loss) if scaler else loss).backward()
    if scaler:  # fp16 policies only: bf16 needs no loss scaling
        scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    if scaler:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()


def setup_distributed(device: str) -> tuple[int, int, str]:
    """(rank, world size, device string); torchrun sets the environment, a plain run is rank 0 of 1."""
    if "RANK" not in os.environ:
        return 0, 1, device
    dist.init_process_group(backend="nccl" if device == "cuda" else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if device == "cuda":
        local = int(os.environ.get("LOCAL_RANK", 0))
        torch.cuda.set_device(local)
        device = f"cuda:{local}"
    return rank, world, device


def machine() -> str:
    if torch.cuda.is_available():
        return torch.cuda.get_device_name()
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs"


def run(args: argparse.Namespace) -> dict:
    rank, world, device = setup_distributed(args.device)
    log = print if rank == 0 else (lambda *a, **k: None)
    if args.batch_size % world:
        raise SystemExit(f"--batch-size {args.batch_size} must be divisible by the number of ranks ({world})")
    policy = Policy.parse(args.policy)
    device_type = device.split(":")[0]
    corpus = load_corpus(args.max_files)
    config = GPTConfig(n_layer=args.n_layer, n_head=args.n_head, d_model=args.d_model, seq_len=args.seq_len,
                       rope_base=args.rope_base, rope_table=args.rope_table)
    torch.manual_seed(args.seed)  # same seed, same initial weights for every variant: runs pair up
    model = GPT(config).to(device=device, dtype=policy.param_dtype)
    log(f"model {model.num_params() / 1e6:.2f}M params, {config}; policy {policy}; "
        f"data {corpus.files[0]} train / {corpus.files[1]} val files, {len(corpus.train) / 1e6:.1f}M / "
        f"{len(corpus.val) / 1e6:.1f}M bytes (corpus {corpus.fingerprint}); {world} rank(s) on {device_type}")
    ddp = DistributedDataParallel(model) if world > 1 else model
    optimizer = make_optimizer(model, args)
    scaler = policy.grad_scaler(device_type)  # None for bf16: nothing to scale
    windows = val_windows(corpus.val, args.eval_windows, args.seq_len)
    gen = torch.Generator().manual_seed(args.seed)
    history, tokens, train_s, start = [], 0, 0.0, time.perf_counter()
    for step in range(args.steps + 1):
        if step % args.eval_every == 0 or step == args.steps:
            result = evaluate(model, windows, args.batch_size, policy, device)
            history.append({"step": step, "val": result["loss"]})
            log(f"step {step:5d}  val {result['loss']:.4f}  " + "  ".join(f"[{k}] {v:.4f}" for k, v in result["buckets"].items()))
        if step == args.steps:
            break
        t0 = time.perf_counter()
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, args)
        x, y = (t.to(device) for t in train_batch(corpus.train, gen, args.batch_size, args.seq_len, rank, world))
        loss = train_step(ddp, model, optimizer, scaler, policy, device_type, x, y)
        if step >= min(5, args.steps // 2):  # the first steps warm up allocators and kernels: not timed
            if device_type == "cuda":
                torch.cuda.synchronize()
            train_s += time.perf_counter() - t0
            tokens += args.batch_size * args.seq_len
        if step % args.log_every == 0 or step == args.steps - 1:
            shown = loss.float()
            if world > 1:  # rank 0 logs the loss of the whole batch, not of its slice
                dist.all_reduce(shown)
                shown /= world
            log(f"step {step:5d}  train {shown.item():.4f}  lr {learning_rate(step, args):.2e}  "
                f"{tokens / train_s if train_s else 0:,.0f} tokens/s")
    summary = {
        "config": asdict(config), "policy": str(policy), "seed": args.seed, "steps": args.steps,
        "batch_size": args.batch_size, "lr": args.lr, "world_size": world, "device": machine(),
        "torch": torch.__version__, "python": platform.python_version(), "corpus": corpus.fingerprint,
        "val": result["loss"], "buckets": result["buckets"], "history": history,
        "tokens_per_s": tokens / train_s if train_s else None, "wall_s": time.perf_counter() - start,
    }
    if args.eval_swap:
        summary["swap"] = eval_swap(model, windows, args, policy, device, log)
    if world > 1:
        # every rank done with its collectives before any tears the group down: a gloo rank whose peer already left
        # can abort in teardown (seen once in a 2-rank CPU run that had finished training)
        dist.barrier()
        dist.destroy_process_group()
    return summary


def eval_swap(model: GPT, windows: torch.Tensor, args: argparse.Namespace, policy: Policy, device: str, log) -> dict:
    """The final weights evaluated under every RoPE variant: the table's direct effect on the loss."""
    swap = {}
    for variant in ROPE_TABLES:
        model.rotary.set_variant(variant)
        swap[variant] = evaluate(model, windows, args.batch_size, policy, device)
        log(f"eval with --rope-table {variant:<10} val {swap[variant]['loss']:.5f}")
    model.rotary.set_variant(args.rope_table)
    return swap


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rope-table", choices=ROPE_TABLES, default="fp32")
    p.add_argument("--policy", default="bf16-mixed", help="an ampdoctor Policy: a preset or 'params=fp32,compute=bf16'")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--tiny", action="store_true", help="a seconds-long smoke run (small model, context and data)")
    p.add_argument("--seed", type=int, default=0)
    for name, kind in (("n_layer", int), ("n_head", int), ("d_model", int), ("seq_len", int), ("batch_size", int),
                       ("steps", int), ("eval_every", int), ("eval_windows", int), ("max_files", int), ("warmup", int)):
        p.add_argument("--" + name.replace("_", "-"), type=kind, default=None, help=f"default {FULL[name]} ({TINY[name]} with --tiny)")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--rope-base", type=float, default=10000.0)
    p.add_argument("--log-every", type=int, default=50)
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    p.add_argument("--eval-swap", action="store_true", help="also evaluate the final weights under every RoPE variant")
    p.add_argument("--json-out", type=Path, help="write the run's summary as JSON (rank 0)")
    args = p.parse_args(argv)
    defaults = TINY if args.tiny else FULL
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    summary = run(args)
    if args.json_out and int(os.environ.get("RANK", 0)) == 0:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
