"""bench/archsweep: the runtime audit on every transformers architecture with a causal-LM, masked-LM or
seq2seq-LM head (issue 21, part 3).

Each architecture is built from a tiny random config (no download) and runs ONE bf16-mixed training step on CPU
under ``ampdoctor.audit``: fp32 weights, ``torch.autocast("cpu", dtype=torch.bfloat16)``, the model's own loss
from ``labels``, backward, an AdamW step. Recorded per architecture: built (or why not), stepped (or the
exception, told apart as a model/config failure -- the same step also fails without the audit -- or an ampdoctor
failure -- it fails only under the audit, or the audit's own code raised), and the findings per rule.

``--inject`` plants, for every rule with a runtime detector, that fault into the architectures and measures
whether the audit reports the injected rule (detection rate); the clean runs give the false-alarm rate.
``--fake`` also audits causal LMs through ``ampdoctor.audit.hf.audit_hf_config(fake=True)`` (FakeTensorMode).

Work happens in worker subprocesses (one import of transformers for many architectures); the parent kills a
worker stuck on one architecture past ``--timeout`` seconds, records a timeout and restarts on the rest.

    PYTHONPATH=src nice -n 19 .venv/bin/python bench/archsweep/archsweep.py --json /tmp/archsweep.json
    ... --only llama,gpt2 --show          # a few, with per-architecture detail
    ... --quick                           # llama, gpt2, bert; two injected faults; < 60 s
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SRC = ROOT / "src"
AMPDOCTOR_SRC = str(SRC / "ampdoctor")

HIDDEN, LAYERS, HEADS, FFN, VOCAB, POSITIONS = 64, 2, 4, 128, 256, 128
SEQ, BATCH = 16, 2

# --------------------------------------------------------------------------------------------------------------
# enumeration and tiny configs


def architectures() -> list[tuple[str, str]]:
    """(model_type, head) for every model type and each of its causal-LM, seq2seq-LM and masked-LM heads."""
    from transformers.models.auto import modeling_auto as ma

    out: set[tuple[str, str]] = set()
    for head, mapping in (("causal", ma.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES), ("seq2seq", ma.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES),
                          ("masked", ma.MODEL_FOR_MASKED_LM_MAPPING_NAMES)):
        out.update((model_type, head) for model_type in mapping)
    return sorted(out)


def label(model_type: str, head: str) -> str:
    """The name an architecture is shown by: the model type, with the head when it is not the causal LM."""
    return model_type if head == "causal" else f"{model_type}[{head}]"


# Generic shrink: whichever of these a config has (ints only) is set to the tiny value.
_SHRINK = {
    **dict.fromkeys(("hidden_size", "d_model", "n_embd", "dim", "embed_dim", "n_embed", "model_dim"), HIDDEN),
    **dict.fromkeys(("num_hidden_layers", "n_layer", "num_layers", "n_layers", "encoder_layers", "decoder_layers",
                     "num_decoder_layers", "num_encoder_layers"), LAYERS),
    **dict.fromkeys(("num_attention_heads", "n_head", "n_heads", "encoder_attention_heads", "decoder_attention_heads",
                     "num_heads"), HEADS),
    **dict.fromkeys(("intermediate_size", "d_ff", "n_inner", "ffn_dim", "encoder_ffn_dim", "decoder_ffn_dim", "hidden_dim",
                     "ffn_hidden_size"), FFN),
    "vocab_size": VOCAB,
    **dict.fromkeys(("max_position_embeddings", "n_positions", "n_ctx", "max_seq_len", "seq_length"), POSITIONS),
    "num_key_value_heads": 2,
    "head_dim": HIDDEN // HEADS,
    "d_kv": HIDDEN // HEADS,
    # partial rotary and multi-head latent attention sizes, which must fit in the head size above
    "rotary_dim": 8, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": HIDDEN // HEADS,
    "kv_lora_rank": 32, "q_lora_rank": 32, "qk_head_dim": 16,  # (qk_head_dim = nope + rope, derived at init)
    **dict.fromkeys(("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"), 4),
    **dict.fromkeys(("num_experts_per_tok", "num_experts_per_token", "moe_topk", "top_k"), 2),
    # grouped routing (experts in groups, the best groups first) over the 4 experts above
    **dict.fromkeys(("n_group", "num_expert_group"), 2), "topk_group": 1,
    **dict.fromkeys(("moe_intermediate_size", "shared_expert_intermediate_size", "expert_intermediate_size"), FFN),
}
# Per-family overrides, only where the generic shrink cannot work (kept few; each says why).
_OVERRIDES: dict[str, dict] = {
    # Reformer's axial position embeddings must multiply to the sequence length, and its chunked attention
    # needs the sequence to be a multiple of the chunk length.
    "reformer": {"axial_pos_shape": [4, 4], "axial_pos_embds_dim": [32, 32], "max_position_embeddings": SEQ,
                 "local_attn_chunk_length": 8, "lsh_attn_chunk_length": 8, "num_hashes": 1},
    # Funnel's block_sizes (not num_hidden_layers) set its depth.
    "funnel": {"block_sizes": [1, 1], "num_decoder_layers": 1},
    # BigBird and LongT5-like sparse attention need sequences of several blocks; block_size shrinks them.
    "big_bird": {"attention_type": "original_full"},
    "bigbird_pegasus": {"attention_type": "original_full"},
}
_TOKEN_IDS = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2, "decoder_start_token_id": 2, "sep_token_id": 3,
              "cls_token_id": 4, "mask_token_id": 5, "unk_token_id": 6}


_LAYER_COUNTS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")


def _keep_layer_kinds(cfg, original: dict) -> None:
    """A hybrid model names each layer's kind in per-layer lists (`layer_types`: linear or full attention, conv,
    sliding window; `mlp_layer_types`: dense or sparse). Its first LAYERS entries may all be of one kind, and a
    fault planted in another kind (a rotary table only the full-attention layers use) would then be planted in
    nothing. Kept: the first layer of every kind of every such list, the same layers in all of them, in order and
    filled up to LAYERS; and at least one round of a list shorter than the depth (a pattern the layers cycle)."""
    for count_key, depth in original.items():
        per_layer = {k: v for k, v in vars(cfg).items() if isinstance(v, list) and len(v) == depth > LAYERS
                     and all(isinstance(x, str) for x in v)}
        cycled = [len(v) for v in vars(cfg).values() if isinstance(v, list) and LAYERS < len(v) < min(depth, 2 * LAYERS + 2)
                  and all(isinstance(x, str) for x in v) and len(set(v)) > 1]
        keep = sorted({kinds.index(kind) for kinds in per_layer.values() for kind in kinds})
        keep = sorted(keep + [i for i in range(depth) if i not in keep][: max(0, LAYERS - len(keep))])
        for key, kinds in per_layer.items():
            setattr(cfg, key, [kinds[i] for i in keep])
        n = max([len(keep) if per_layer else LAYERS, *cycled])
        if n != LAYERS:
            setattr(cfg, count_key, n)


def _shrink(cfg, depth: int = 0) -> None:
    from transformers import PretrainedConfig

    original = {k: getattr(cfg, k) for k in _LAYER_COUNTS if isinstance(getattr(cfg, k, None), int)}
    for key, value in _SHRINK.items():
        if hasattr(cfg, key) and isinstance(getattr(cfg, key), int) and not isinstance(getattr(cfg, key), bool):
            try:
                setattr(cfg, key, value)
            except Exception:  # noqa: BLE001 - a read-only property: leave it
                pass
    for key, value in _TOKEN_IDS.items():
        cur = getattr(cfg, key, None)
        if isinstance(cur, int) and not isinstance(cur, bool) and cur >= VOCAB - 8:
            setattr(cfg, key, value)
    for key in ("use_cache",):
        if hasattr(cfg, key):
            setattr(cfg, key, False)
    _keep_layer_kinds(cfg, original)
    if depth < 2:
        for key, value in list(vars(cfg).items()):
            if isinstance(value, PretrainedConfig):
                _shrink(value, depth + 1)


def tiny_config(model_type: str):
    from transformers import AutoConfig

    cfg = AutoConfig.for_model(model_type)
    _shrink(cfg)
    for key, value in _OVERRIDES.get(model_type, {}).items():
        setattr(cfg, key, value)
    if getattr(cfg, "decoder_start_token_id", None) is None and getattr(cfg, "is_encoder_decoder", False):
        cfg.decoder_start_token_id = 0  # T5-family configs no longer carry it; the seq2seq loss shifts labels with it
    return cfg


def build(model_type: str, head: str):
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM, AutoModelForSeq2SeqLM

    cls = {"causal": AutoModelForCausalLM, "seq2seq": AutoModelForSeq2SeqLM, "masked": AutoModelForMaskedLM}[head]
    torch.manual_seed(0)
    cfg = tiny_config(model_type)
    model = cls.from_config(cfg)
    model = model.float()
    model.train()
    return model, cfg


def batch_for(cfg):
    import torch

    g = torch.Generator().manual_seed(0)
    vocab = int(getattr(cfg, "vocab_size", None) or getattr(getattr(cfg, "text_config", None), "vocab_size", VOCAB) or VOCAB)
    ids = torch.randint(8, min(vocab, VOCAB), (BATCH, SEQ), generator=g)
    return {"input_ids": ids, "labels": ids.clone()}


# --------------------------------------------------------------------------------------------------------------
# one step


class Step:
    """What one audited step does; an injector changes some of it."""

    def __init__(self) -> None:
        self.policy = "bf16-mixed"
        self.autocast_dtype = "bfloat16"  # None: no autocast
        self.scaler = False
        self.micro = 1
        self.lr = 1e-3
        self.after_build = []  # fn(model)
        self.after_backward = []  # fn(model, micro_index)
        self.loss_fn = None  # fn(output, batch) -> loss
        self.after_optimizer_built = []  # fn(model, opt)
        self.around = None  # context manager factory around the whole step (inside the audit)
        self.check = None  # fn() -> None, or why the fault did not take effect in the run (then: not injectable)


def _loss(out, batch):
    loss = getattr(out, "loss", None)
    if loss is None:
        raise RuntimeError("the model returned no loss from labels")
    return loss


def run_step(model, batch, step: Step, audited: bool):
    """One step; returns the audit's report (None when not audited)."""
    import contextlib

    import torch

    import ampdoctor

    opt = torch.optim.AdamW(model.parameters(), lr=step.lr, foreach=False)
    for fn in step.after_optimizer_built:
        fn(model, opt)
    scaler = torch.amp.GradScaler("cpu") if step.scaler else None  # ampdoctor: ignore[AMP004] (an injected fault)
    dtype = getattr(torch, step.autocast_dtype) if step.autocast_dtype else None
    audit = ampdoctor.audit(policy=step.policy, model=model) if audited else contextlib.nullcontext()
    try:
        _step(model, batch, step, audit, opt, scaler, dtype)
    except Exception as err:  # noqa: BLE001 - the report of a failed step is kept: it may name the cause
        err.report = audit.report if audited else None  # type: ignore[attr-defined]
        raise
    return audit.report if audited else None


def _step(model, batch, step, audit, opt, scaler, dtype):
    import contextlib

    import torch

    with audit:
        with (step.around() if step.around else contextlib.nullcontext()):
            for i in range(step.micro):
                with torch.autocast("cpu", dtype=dtype) if dtype is not None else contextlib.nullcontext():
                    out = model(**batch)
                    loss = (step.loss_fn or _loss)(out, batch) / step.micro
                (scaler.scale(loss) if scaler else loss).backward()
                for fn in step.after_backward:
                    fn(model, i)
            if scaler:
                scaler.step(opt)
                scaler.update()
            else:
                opt.step()
            opt.zero_grad(set_to_none=True)


def _frames(err: BaseException) -> list[str]:
    return [f"{fs.filename}:{fs.lineno} in {fs.name}" for fs in traceback.extract_tb(err.__traceback__)]


def _in_ampdoctor(err: BaseException) -> str | None:
    """The innermost ampdoctor frame of the traceback, if the exception passed through ampdoctor's own code
    (other than the audit's context manager re-raising the step's exception)."""
    frames = [fs for fs in traceback.extract_tb(err.__traceback__)]
    inner = [fs for fs in frames if fs.filename.startswith(AMPDOCTOR_SRC)]
    if not inner:
        return None
    # The dispatch mode's __torch_dispatch__ sits under every op: an ampdoctor frame *below* which the exception
    # was raised by torch itself is an ampdoctor crash only if the same step fails without the audit too -- decided
    # by the caller with the bare rerun. Here: the innermost ampdoctor frame.
    fs = inner[-1]
    return f"{os.path.relpath(fs.filename, str(ROOT))}:{fs.lineno} in {fs.name}"


def finding_dict(f) -> dict:
    return {"id": f.rule_id, "severity": f.severity.value, "message": " ".join(f.message.split())[:400],
            "location": str(f.location)[:200], "module": f.location.module}


def one(model_type: str, head: str, mode: str) -> dict:
    """Build and step one architecture in `mode` ('clean', 'fake', or 'inject:AMPnnn')."""
    import torch

    torch.set_num_threads(1)
    res: dict = {"arch": label(model_type, head), "head": head, "mode": mode}
    t0 = time.monotonic()
    if mode == "fake":
        return _fake(model_type, head, res, t0)
    if mode == "cli":
        return _cli(model_type, head, res, t0)
    step = Step()
    applies = None
    if mode.startswith("inject:"):
        from injectors import INJECTORS  # noqa: PLC0415 - bench/archsweep/injectors.py

        rule = mode.split(":", 1)[1]
        res["rule"] = rule
        applies = INJECTORS[rule]
    try:
        model, cfg = build(model_type, head)
    except Exception as err:  # noqa: BLE001
        res.update(built=False, reason=f"{type(err).__name__}: {' '.join(str(err).split())[:300]}")
        return res
    res["built"] = True
    res["params"] = sum(p.numel() for p in model.parameters())
    batch = batch_for(cfg)
    if applies is not None:
        why_not = applies(model, cfg, batch, step)
        if why_not:
            res.update(injected=False, reason=why_not)
            return res
        res["injected"] = True
    # Does the step work without the audit? (decides model failure vs ampdoctor failure)
    import copy

    bare_model = copy.deepcopy(model)
    try:
        run_step(bare_model, batch, step, audited=False)
        bare_ok, bare_err = True, None
    except Exception as err:  # noqa: BLE001
        bare_ok, bare_err = False, f"{type(err).__name__}: {' '.join(str(err).split())[:300]}"
    del bare_model
    res["bare_ok"] = bare_ok
    try:
        report = run_step(model, batch, step, audited=True)
        res["step_ok"] = True
    except Exception as err:  # noqa: BLE001
        res["step_ok"] = False
        res["error"] = f"{type(err).__name__}: {' '.join(str(err).split())[:300]}"
        res["ampdoctor_frame"] = _in_ampdoctor(err)
        res["traceback"] = traceback.format_exc()[-3000:]
        if step.check is not None and (why := step.check()):
            res.update(injected=False, reason=why)
        report = getattr(err, "report", None)
        if report is not None:  # the report the audit wrote for the failed step
            res["findings"] = [finding_dict(f) for f in report.findings]
            res["report_errors"] = [str(e)[:400] for e in report.errors]
        else:
            res["no_report"] = True
        if bare_ok:
            res["failure"] = "ampdoctor"  # the step runs without the audit and fails under it
        else:
            res["failure"] = "model"
            res["bare_error"] = bare_err
        res["seconds"] = round(time.monotonic() - t0, 1)
        return res
    if step.check is not None and (why := step.check()):
        res.update(injected=False, reason=why)
    res["failure"] = None if bare_ok else "bare-only"  # (the audited step worked where the bare one did not)
    if not bare_ok:
        res["bare_error"] = bare_err
    res["findings"] = [finding_dict(f) for f in report.findings]
    res["report_errors"] = [str(e)[:400] for e in report.errors]
    res["seconds"] = round(time.monotonic() - t0, 1)
    return res


def _fake(model_type: str, head: str, res: dict, t0: float) -> dict:
    """The `audit --hf-config --fake` path (causal LMs only: audit_hf_config builds AutoModelForCausalLM)."""
    if head != "causal":
        res.update(built=False, reason="fake path builds causal LMs only (audit_hf_config)")
        return res
    from ampdoctor.audit.hf import ConfigError, audit_hf_config

    cfg = tiny_config(model_type)
    raw = {k: v for k, v in cfg.to_diff_dict().items() if k not in ("transformers_version", "architectures")}
    raw["model_type"] = model_type
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(raw, fh)
    try:
        a = audit_hf_config(fh.name, fake=True, seq_len=SEQ, batch_size=BATCH)
        res.update(built=True, step_ok=True, failure=None, findings=[finding_dict(f) for f in a.report.findings],
                   report_errors=[str(e)[:400] for e in a.report.errors])
    except ConfigError as err:
        res.update(built=False, reason=f"ConfigError: {' '.join(str(err).split())[:300]}")
    except Exception as err:  # noqa: BLE001
        res.update(built=True, step_ok=False, error=f"{type(err).__name__}: {' '.join(str(err).split())[:300]}",
                   ampdoctor_frame=_in_ampdoctor(err), traceback=traceback.format_exc()[-3000:])
        bare = _bare_fake(fh.name)  # the same fake build and step without the audit
        res["bare_ok"] = bare is None
        res["failure"] = "ampdoctor" if bare is None else "model"
        if bare is not None:
            res["bare_error"] = bare
    finally:
        os.unlink(fh.name)
    res["seconds"] = round(time.monotonic() - t0, 1)
    return res


def _hf_config_file(model_type: str) -> str:
    cfg = tiny_config(model_type)
    raw = {k: v for k, v in cfg.to_diff_dict().items() if k not in ("transformers_version", "architectures")}
    raw["model_type"] = model_type
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(raw, fh)
    return fh.name


def _cli(model_type: str, head: str, res: dict, t0: float) -> dict:
    """`ampdoctor audit --hf-config CONFIG --seq-len 16 --batch-size 2 --format json` (real tensors, AdamW), run
    in-process through `ampdoctor.cli.main`: an exception that escapes main is the traceback the CLI prints (and
    it writes no report)."""
    if head != "causal":
        res.update(built=False, reason="audit --hf-config builds causal LMs only")
        return res
    from ampdoctor.cli import main as cli_main

    path = _hf_config_file(model_type)
    out = path + ".report.json"
    try:
        rc = cli_main(["audit", "--hf-config", path, "--seq-len", str(SEQ), "--batch-size", str(BATCH), "--format", "json", "--output", out])
        res["rc"] = rc
        if not os.path.exists(out):
            if rc == 2:
                res.update(built=False, reason="exit 2, no report (a usage error: the config did not load)")
            else:
                res.update(built=True, step_ok=False, failure="no-report", error=f"exit {rc}, no report written")
        else:
            rep = json.loads(Path(out).read_text())
            fs = rep.get("findings", [])
            res.update(built=True, step_ok=True, failure=None,
                       findings=[{"id": f["id"], "severity": f["severity"], "message": " ".join(f["message"].split())[:400],
                                  "location": str(f.get("location"))[:200], "module": (f.get("location") or {}).get("module")} for f in fs],
                       report_errors=[str(e)[:400] for e in rep.get("errors", [])])
            if rc == 2:
                res.update(built=False, reason="; ".join(res["report_errors"])[:300] or "exit 2 (a usage error: the config did not load)")
    except SystemExit as err:  # argparse
        res.update(built=False, reason=f"SystemExit {err.code}")
    except Exception as err:  # noqa: BLE001 - escaped cli.main: a traceback for the user, no report
        res.update(built=True, step_ok=False, error=f"{type(err).__name__}: {' '.join(str(err).split())[:300]}",
                   ampdoctor_frame=_in_ampdoctor(err), traceback=traceback.format_exc()[-3000:], failure="cli-traceback")
    finally:
        for f in (path, out):
            if os.path.exists(f):
                os.unlink(f)
    res["seconds"] = round(time.monotonic() - t0, 1)
    return res


def _bare_fake(path: str) -> str | None:
    """audit_hf_config(fake=True)'s build and step (autocast bf16, forward, loss, backward) without the audit: None
    when it works, else the exception in one line."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from ampdoctor.audit.hf import build_model, load_config
    from ampdoctor.policy import Policy

    try:
        config = load_config(path)
        with FakeTensorMode(allow_non_fake_inputs=False):
            torch.manual_seed(0)
            model = build_model(config, Policy.preset("bf16-mixed"))
            ids = torch.randint(0, int(getattr(config, "vocab_size", VOCAB)), (BATCH, SEQ))
            with torch.autocast("cpu", dtype=torch.bfloat16):
                out = model(input_ids=ids, labels=ids)
                loss = out.loss if getattr(out, "loss", None) is not None else out[0]
            loss.backward()
        return None
    except Exception as err:  # noqa: BLE001
        return f"{type(err).__name__}: {' '.join(str(err).split())[:300]}"


def worker(jobs: list[str], out: str) -> int:
    """Run jobs 'model_type/head/mode' in order, appending one JSON line each; a 'start' line before each."""
    import warnings

    warnings.filterwarnings("ignore")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    sys.path.insert(0, str(HERE))
    for job in jobs:
        model_type, head, mode = job.split("/", 2)
        with open(out, "a") as fh:
            fh.write(json.dumps({"start": job}) + "\n")
        try:
            res = one(model_type, head, mode)
        except BaseException as err:  # noqa: BLE001 - a bench bug must not stop the sweep
            res = {"arch": label(model_type, head), "head": head, "mode": mode, "built": False,
                   "reason": f"bench error {type(err).__name__}: {err}", "traceback": traceback.format_exc()[-2000:]}
        res["job"] = job
        with open(out, "a") as fh:
            fh.write(json.dumps(res) + "\n")
    return 0


# --------------------------------------------------------------------------------------------------------------
# the parent: workers with a timeout per job


def run_jobs(jobs: list[str], timeout: float, log=print) -> list[dict]:
    results: dict[str, dict] = {}
    remaining = list(jobs)
    env = {**os.environ, "PYTHONPATH": str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""), "OMP_NUM_THREADS": "1",
           "TRANSFORMERS_VERBOSITY": "error", "TOKENIZERS_PARALLELISM": "false"}
    while remaining:
        fd, out = tempfile.mkstemp(suffix=".jsonl")
        os.close(fd)
        # The worker's stderr goes to a file, read only when it dies: a pipe nobody reads while it runs fills up
        # with library warnings, blocks the worker, and its job would be counted as a timeout.
        errors = tempfile.TemporaryFile()
        proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker", out, *remaining], env=env,
                                stdout=subprocess.DEVNULL, stderr=errors, start_new_session=True)
        current, since, seen = None, time.monotonic(), 0
        while True:
            time.sleep(0.2)
            lines = Path(out).read_text().splitlines()
            for line in lines[seen:]:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if "start" in rec:
                    current, since = rec["start"], time.monotonic()
                else:
                    results[rec["job"]] = rec
                    current = None
                    log(_progress(rec, len(results), len(jobs)))
            seen = len(lines)
            if proc.poll() is not None:
                break
            if current is not None and time.monotonic() - since > timeout:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                break
        if current is not None and current not in results:
            mt, head, mode = current.split("/", 2)
            rc = proc.returncode
            errors.seek(max(0, errors.seek(0, os.SEEK_END) - 1500))
            err = errors.read().decode(errors="replace")
            results[current] = {"job": current, "arch": label(mt, head), "head": head, "mode": mode, "built": None, "step_ok": False,
                                "failure": "timeout" if rc == -signal.SIGKILL else "process-died",
                                "error": f"no result within {timeout:.0f} s" if rc == -signal.SIGKILL else f"worker exited {rc}: {err[-400:]}"}
            log(_progress(results[current], len(results), len(jobs)))
        elif proc.returncode not in (0, None) and not current:
            pass
        errors.close()
        os.unlink(out)
        remaining = [j for j in jobs if j not in results]
    return [results[j] for j in jobs]


def _progress(rec: dict, n: int, total: int) -> str:
    if rec.get("built") is False:
        state = "not built: " + rec.get("reason", "")[:100]
    elif rec.get("injected") is False:
        state = "not injectable: " + rec.get("reason", "")[:100]
    elif not rec.get("step_ok"):
        state = f"step failed ({rec.get('failure')}): {rec.get('error', '')[:100]}"
    else:
        ids = Counter(f["id"] for f in rec.get("findings", []))
        state = "ok " + (", ".join(f"{k}x{v}" for k, v in sorted(ids.items())) or "no findings")
    return f"[{n}/{total}] {rec['job']} {rec.get('seconds', '')}s {state}"


# --------------------------------------------------------------------------------------------------------------
# tables

WARN = ("warning", "error")


def _serious(rec: dict) -> list[dict]:
    return [f for f in rec.get("findings", []) if f["severity"] in WARN]


def split_line(results: list[dict]) -> str:
    """Both splits of the architectures (by a hash of the model type, as every corpus here is split): clean runs with
    a warning or error, and injected faults detected. Detectors are changed only while looking at the tuning split."""
    import benchdocs  # noqa: PLC0415

    parts = []
    for split in ("tune", "heldout"):
        mine = [r for r in results if benchdocs.split_of(r["arch"]) == split]
        stepped = [r for r in mine if r["mode"] == "clean" and r.get("step_ok")]
        flagged = [r for r in stepped if _serious(r)]
        ran = [r for r in mine if r["mode"].startswith("inject:") and r.get("injected") and "findings" in r]
        hit = [r for r in ran if any(f["id"] == r["mode"].split(":", 1)[1] for f in r["findings"])]
        parts.append(f"{split}: {len(flagged)}/{len(stepped)} clean architectures with a warning or error, "
                     f"{len(hit)}/{len(ran)} injected faults detected")
    return "By split (hash of the model type): " + "; ".join(parts) + "."


def summarize(results: list[dict], show: bool = False) -> str:
    import benchdocs  # noqa: PLC0415

    out: list[str] = []
    clean = [r for r in results if r["mode"] == "clean"]
    stepped = [r for r in clean if r.get("step_ok")]
    built = [r for r in clean if r.get("built")]
    flagged = [r for r in stepped if _serious(r)]
    errored = [r for r in stepped if any(f["severity"] == "error" for f in r.get("findings", []))]
    anyf = [r for r in stepped if r.get("findings")]
    out.append(f"Clean runs: {len(clean)} architectures enumerated, {len(built)} built, {len(stepped)} stepped under the audit; "
               f"{len(flagged)} of {len(stepped)} ({100 * len(flagged) / max(1, len(stepped)):.0f}%) got a warning or error, "
               f"{len(errored)} an error; {len(anyf)} any finding (notes included).\n")
    out.append(split_line(results) + "\n")
    per_rule: dict[tuple[str, str], set] = defaultdict(set)
    for r in stepped:
        for f in r.get("findings", []):
            per_rule[(f["id"], f["severity"])].add(r["arch"])
    rows = [[rid, sev, len(archs), f"{100 * len(archs) / max(1, len(stepped)):.0f}%", ", ".join(sorted(archs)[:8]) + (" ..." if len(archs) > 8 else "")]
            for (rid, sev), archs in sorted(per_rule.items(), key=lambda kv: (-len(kv[1]), kv[0]))]
    out.append("Findings on clean runs, per rule:\n")
    out.append(benchdocs.markdown_table(["rule", "severity", "architectures", "share of stepped", "e.g."], rows) if rows else "(none)")
    out.append("")
    fake = [r for r in results if r["mode"] == "fake" and r.get("built")]
    if fake:
        fok = [r for r in fake if r.get("step_ok")]
        fflag = [r for r in fok if _serious(r)]
        fper: Counter = Counter(f["id"] + " " + f["severity"] for r in fok for f in {(g["id"], g["severity"]): g for g in r.get("findings", [])}.values())
        out.append(f"Fake-tensor path (`audit_hf_config(fake=True)`, causal LMs): {len(fake)} built, {len(fok)} audited, "
                   f"{len(fflag)} with a warning or error ({', '.join(f'{k}: {v}' for k, v in fper.most_common()) or 'none'}); "
                   f"{len(fake) - len(fok)} failed: " + "; ".join(f"{r['arch']} ({r.get('failure')}: {r.get('error', '')[:80]})" for r in fake if not r.get("step_ok"))[:1500] + "\n")
    cli = [r for r in results if r["mode"] == "cli" and r.get("built")]
    if cli:
        cok = [r for r in cli if r.get("step_ok")]
        cflag = [r for r in cok if _serious(r)]
        ctb = [r for r in cli if r.get("failure") == "cli-traceback"]
        cper: Counter = Counter(f["id"] + " " + f["severity"] for r in cok for f in {(g["id"], g["severity"]): g for g in r.get("findings", [])}.values())
        out.append(f"CLI path (`ampdoctor audit --hf-config CONFIG --seq-len {SEQ} --batch-size {BATCH} --format json`, in-process, "
                   f"causal LMs, real tensors): {len(cli)} built, {len(cok)} wrote a report, {len(cflag)} of them with a warning or "
                   f"error ({', '.join(f'{k}: {v}' for k, v in cper.most_common()) or 'none'}); {len(ctb)} ended in an "
                   "ampdoctor traceback and no report: " + "; ".join(f"{r['arch']} ({r.get('error', '')[:70]})" for r in ctb)[:2500] + "\n")
    inj = [r for r in results if r["mode"].startswith("inject:")]
    if inj:
        rows = []
        by_rule: dict[str, list] = defaultdict(list)
        for r in inj:
            by_rule[r["mode"].split(":", 1)[1]].append(r)
        for rule in sorted(by_rule):
            rs = by_rule[rule]
            planted = [r for r in rs if r.get("injected")]
            ran = [r for r in planted if "findings" in r]  # a report came back (also for a step the fault made fail)
            hit = [r for r in ran if any(f["id"] == rule for f in r.get("findings", []))]
            failed = [r for r in planted if not r.get("step_ok")]
            missed = sorted(r["arch"] for r in ran if r not in hit)
            na = sorted({r.get("reason", "")[:60] for r in rs if r.get("injected") is False})
            rows.append([rule, len(planted), len(ran), len(hit), f"{100 * len(hit) / max(1, len(ran)):.0f}%" if ran else "-",
                         len(failed), ", ".join(missed[:6]) + (" ..." if len(missed) > 6 else ""), "; ".join(na)[:120]])
        out.append("Fault injection, per rule (detected = the injected rule is among the findings):\n")
        out.append(benchdocs.markdown_table(["rule", "injected into", "reported", "detected", "rate", "of which step failed", "missed on", "not injectable where"], rows))
        out.append("")
    # not built / not stepped, grouped
    groups: dict[str, list] = defaultdict(list)
    for r in clean:
        if r.get("built") is False:
            groups["not built: " + _reason_key(r.get("reason", ""))].append(r["arch"])
        elif not r.get("step_ok") and r.get("failure") in ("model", "timeout", "process-died"):
            groups[f"step failed ({r.get('failure')}): " + _reason_key(r.get("error", ""))].append(r["arch"])
    if groups:
        out.append("Architectures not built or not stepped (model/config failures, unrelated to dtypes unless said):\n")
        out.append(benchdocs.markdown_table(["reason", "n", "architectures"], [[k.replace("|", "/"), len(v), ", ".join(sorted(v))]
                                                                            for k, v in sorted(groups.items(), key=lambda kv: -len(kv[1]))]))
        out.append("")
    tb = [r for r in results if r.get("failure") in ("ampdoctor", "cli-traceback") or (r.get("step_ok") and r.get("report_errors"))
          or (r.get("no_report") and r["mode"] == "clean")]
    out.append(f"ampdoctor failures (the step runs without the audit and fails under it, the report has errors, or "
               f"`audit --hf-config` let the step's exception out as a traceback with no report): {len(tb)}\n")
    if tb:
        out.append(benchdocs.markdown_table(["architecture", "mode", "exception", "innermost ampdoctor frame"],
                                            [[r["arch"], r["mode"], (r.get("error") or "; ".join(r.get("report_errors", [])))[:200].replace("|", "/"),
                                              r.get("ampdoctor_frame") or "-"] for r in tb]))
        out.append("")
    if show:
        out.append("Per architecture:\n")
        for r in results:
            out.append(_progress(r, 0, 0).split(" ", 1)[1])
            for f in r.get("findings", []):
                out.append(f"    {f['id']} {f['severity']}: {f['message'][:200]} [{f['location']}]")
            if r.get("traceback") and r.get("failure") == "ampdoctor":
                out.append("    " + r["traceback"].replace("\n", "\n    "))
    return "\n".join(out)


def _reason_key(text: str) -> str:
    import re

    text = re.sub(r"\d+", "N", text)
    return text[:110]


# --------------------------------------------------------------------------------------------------------------


QUICK = [("llama", "causal"), ("gpt2", "causal"), ("bert", "masked")]
QUICK_INJECT = ["AMP002", "AMP214"]
# The runs the docs block summarizes (the final pass of 2026-11-26; the two ran side by side).
RUN_COMMANDS = ("bench/archsweep/archsweep.py --modes clean,inject --timeout 120 --json clean_inject.json",
                "bench/archsweep/archsweep.py --modes cli,fake --timeout 120 --json cli_fake.json",
                "bench/archsweep/archsweep.py --from-json clean_inject.json --from-json cli_fake.json --markdown")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "--worker":
        return worker(argv[2:], argv[1])
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--only", help="model types, comma-separated")
    p.add_argument("--modes", default="clean", help="comma-separated: clean, fake, inject (all runtime rules) or inject:AMPnnn")
    p.add_argument("--inject-archs", type=int, default=40, help="architectures per injected rule (the first that step cleanly)")
    p.add_argument("--timeout", type=float, default=90.0)
    p.add_argument("--json", help="write raw results here")
    p.add_argument("--from-json", action="append", default=[], help="summarize saved results instead of running")
    p.add_argument("--show", action="store_true")
    p.add_argument("--markdown", action="store_true", help="write the block in docs/benchmarks.md")
    args = p.parse_args(argv)
    sys.path.insert(0, str(ROOT / "bench"))
    sys.path.insert(0, str(HERE))
    import benchdocs  # noqa: PLC0415

    t0 = time.monotonic()
    results: list[dict] = []
    merged: dict[str, dict] = {}
    for path in args.from_json:  # a later file's result for a job replaces an earlier one's
        merged.update((r["job"], r) for r in json.loads(Path(path).read_text()))
    results = list(merged.values())
    if not args.from_json:
        archs = architectures()
        if args.quick:
            archs = QUICK
        elif args.only:
            names = set(args.only.split(","))
            archs = [a for a in archs if a[0] in names]
        modes = args.modes.split(",")
        jobs = []
        for mode in modes:
            if mode in ("clean", "fake", "cli"):
                jobs += [f"{mt}/{head}/{mode}" for mt, head in archs]
        inject = [m for m in modes if m.startswith("inject")]
        if args.quick:
            inject = [f"inject:{r}" for r in QUICK_INJECT]
        if inject:
            from injectors import INJECTORS  # noqa: PLC0415

            rules = sorted(INJECTORS) if "inject" in inject else [m.split(":", 1)[1] for m in inject]
            for rule in rules:
                jobs += [f"{mt}/{head}/inject:{rule}" for mt, head in _injection_pool(archs, args, rule)]
        results = run_jobs(jobs, args.timeout, log=(lambda s: print(s, file=sys.stderr, flush=True)))
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1))
    text = summarize(results, show=args.show)
    print(text)
    if args.markdown and not args.quick:
        runs = ""
        if args.from_json:
            runs = ("The runs summarized (each `PYTHONPATH=src nice -n 5 .venv/bin/python bench/archsweep/archsweep.py ...`, "
                    "one worker process at a time per run, a job killed past --timeout):\n\n" + "\n".join(f"    {c}" for c in RUN_COMMANDS) + "\n\n")
        benchdocs.write_block("archsweep", "## Runtime audit on every transformers architecture (bench/archsweep)",
                              runs + benchdocs.stamp(time.monotonic() - t0 if not args.from_json else None) + "\n\n" + text)
    return 0


ROTARY_RULES = ("AMP002", "AMP005", "AMP101", "AMP103")  # plantable only where there is a rotary embedding


def _injection_pool(archs, args, rule):
    """The architectures a rule's fault is planted into: with bench/archsweep/pool.json (written from a clean
    sweep), its 'pool' (40 architectures that stepped cleanly, evenly spaced over the list), and for the rotary
    rules every architecture that stepped (those without a rotary embedding are counted as not injectable);
    with --quick/--only, the given architectures."""
    pool_file = HERE / "pool.json"
    if args.quick or args.only or not pool_file.exists():
        return archs if (args.quick or args.only) else archs[: args.inject_archs]
    saved = json.loads(pool_file.read_text())
    names = set(saved["stepped"] if rule in ROTARY_RULES else saved["pool"][: args.inject_archs])
    return [a for a in archs if f"{a[0]}/{a[1]}" in names]


if __name__ == "__main__":
    sys.exit(main())
