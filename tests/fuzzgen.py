"""Structure-aware generators for fuzzing the config readers and the CLI (issue 11), shared by tests/test_fuzz.py (a
few hundred examples in CI) and bench/fuzz.py (tens of thousands).

Each generator draws a *case*: files to materialise in a fresh folder (`Entry`: regular files, FIFOs, dangling
symlinks, symlink loops, directories named like configs, unreadable and empty files) and what to run on them.
Config documents follow each framework's real key schema (DeepSpeed `bf16.enabled`, HF `deepspeed` as a path, inline
JSON, base64 or a dict, accelerate `deepspeed_config.deepspeed_config_file`, Lightning `trainer.strategy.init_args`,
torchtune `_component_`...), with values that are sometimes right and sometimes of a type the framework rejects,
serialised as JSON, YAML (anchors, aliases, merge keys, duplicated keys) or env files, with BOMs, CRLF line ends,
truncation and garbage.

`run_case` runs one case under a wall-clock bound and returns an `Outcome`: the seconds it took, an uncaught
exception (as a traceback), a hang, and the violated invariants (an input error that names no file, a message that
echoes a 5,000-character value, a CLI exit code outside 0/1/2, "Traceback" in the CLI's output).
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import signal
import stat
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import yaml
from hypothesis import strategies as st

from ampdoctor.lint import lint_paths
from ampdoctor.lint.configs import lint_config_files
from ampdoctor.report import Report, write_report

BOUND_S = 2.0  # the most one input may take; more is a hang
MAX_MESSAGE = 600  # an input error quotes values cut short, never a 5,000-character value whole
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0  # chmod 000 denies nothing to root

# --- values ----------------------------------------------------------------------------------------

LONG = st.builds(lambda c, n: c * n, st.sampled_from(["x", "é", "/", "a/", "\x00", "{"]), st.sampled_from([255, 300, 4097, 5000]))
ODD_STRINGS = st.sampled_from([
    "true", "false", "True", "yes", "maybe", "auto", "AUTO", " auto ", "four", "1e3", "0x10", "-1", "0", "", " ", "\t",
    "float128", "bfloat8", "torch.bfloat16", "bf16", "fp16", "fp32", "no", "NaN", "inf", "\u221e", "\x00", "bf\x0016",
    "\U0001d51f\U0001d52316", "null", "~", "{", "[]", "{}", "\ufeffbf16", "bf16\r\n", "bf16 # comment", "${MIXED_PRECISION}",
])
ODD_SCALARS = st.one_of(
    st.none(), st.booleans(), ODD_STRINGS, st.integers(-(2**70), 2**70), st.sampled_from([0, -1, 2**31, 2**63, -(2**63), 10**30, 10**400]),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=10), LONG,
)
ODD = st.one_of(ODD_SCALARS, st.lists(ODD_SCALARS, max_size=3), st.dictionaries(st.text(max_size=6), ODD_SCALARS, max_size=3))

# Paths a config may point at. The tree generators create some of these names as odd kinds (FIFO, loop, folder...).
SPECIAL_NAMES = ("pipe.json", "loop.json", "dangling.json", "dir.json", "locked.json", "empty.json", "garbage.json")
PATHS = st.one_of(
    st.sampled_from([
        "ds_config.json", "./ds_config.json", "../ds_config.json", "sub/ds_config.json", "missing.json", "zero3.json", ".", "..",
        "/", "/dev/null", "/dev/zero", "/proc/self/status", "~/ds.json", "$HOME/ds.json", "ds\x00.json", "", " ", "\n",
        "args.json", "config.yaml", "C:\\configs\\ds.json", "file:///tmp/ds.json", "ds_config.json\n", "\u00e9\u00e8/ds.json",
        *SPECIAL_NAMES,
    ]),
    st.builds(lambda n: "d" * n + ".json", st.sampled_from([250, 256, 300])),
    st.builds(lambda n: "a/" * n + "ds.json", st.sampled_from([100, 2100])),
    LONG,
)


def _value(good: list[Any]) -> st.SearchStrategy[Any]:
    """Mostly a value the framework takes, sometimes one of the wrong type or shape."""
    right = st.sampled_from(good)
    return st.one_of(right, right, ODD)


def _doc(schema: dict[str, Any], anchors: tuple[str, ...] = (), clean: bool = False) -> st.SearchStrategy[dict[str, Any]]:
    """A dict following `schema` (key -> good values, or a nested schema): `anchors` always present (so the
    framework is recognised), every other key optional; unless `clean`, values and nested blocks are sometimes of the
    wrong type."""

    def spec(value: Any) -> st.SearchStrategy[Any]:
        if isinstance(value, dict):
            nested = _doc(value, clean=clean)
            return nested if clean else st.one_of(nested, nested, nested, ODD)
        if isinstance(value, st.SearchStrategy):
            return value
        return st.sampled_from(value) if clean else _value(value)

    required = {k: spec(v) for k, v in schema.items() if k in anchors}
    optional = {k: spec(v) for k, v in schema.items() if k not in anchors}
    return st.fixed_dictionaries(required, optional=optional)


@st.composite
def _one_wrong(draw: st.DrawFn, doc: dict[str, Any]) -> dict[str, Any]:
    """A right config with one value (at any depth) replaced by one of the wrong type, or one key removed."""
    paths: list[tuple[Any, ...]] = []
    todo: list[tuple[tuple[Any, ...], Any]] = [((), doc)]
    while todo:
        prefix, node = todo.pop()
        if isinstance(node, dict):
            for key, child in node.items():
                paths.append((*prefix, key))
                todo.append(((*prefix, key), child))
    if not paths:
        return doc
    path = draw(st.sampled_from(sorted(paths, key=repr)))
    node = doc
    for key in path[:-1]:
        node = node[key]
    if draw(st.integers(0, 4)) == 0:
        del node[path[-1]]
    else:
        node[path[-1]] = draw(ODD)
    return doc


def schema_docs(schema: dict[str, Any], anchors: tuple[str, ...] = ()) -> st.SearchStrategy[dict[str, Any]]:
    """Documents of a framework: right ones (a third), right ones with one wrong value (a third), and noisy ones."""
    clean = _doc(schema, anchors, clean=True)
    return st.one_of(clean, clean.flatmap(_one_wrong), _doc(schema, anchors))


BOOLS = [True, False, "true", "false", "auto", 1, 0]
DTYPES = ["bf16", "fp16", "fp32", "bfloat16", "float16", "float32", "torch.bfloat16", "auto", "fp8"]
COUNTS = [1, 2, 4, 8, 16, "auto"]

HALF_BLOCK = {"enabled": BOOLS, "loss_scale": [0, 128, 1.5], "initial_scale_power": [16, 32], "loss_scale_window": [1000],
              "hysteresis": [2], "min_loss_scale": [1], "type": ["bfloat16", "bf16", "float16"],
              "bf16_master_weights_and_grads": BOOLS, "bf16_optimizer_states": BOOLS, "immediate_grad_update": BOOLS}
DEEPSPEED = {
    "train_micro_batch_size_per_gpu": COUNTS, "train_batch_size": COUNTS + [64, 96], "gradient_accumulation_steps": COUNTS,
    "fp16": HALF_BLOCK, "bf16": HALF_BLOCK, "bfloat16": {"enabled": BOOLS}, "amp": {"enabled": BOOLS, "opt_level": ["O1", "O2"]},
    "zero_optimization": {"stage": [0, 1, 2, 3, "3"], "offload_optimizer": {"device": ["cpu", "nvme", "none"]},
                          "offload_param": {"device": ["cpu"]}, "contiguous_gradients": BOOLS},
    "data_types": {"grad_accum_dtype": DTYPES}, "communication_data_type": DTYPES, "gradient_clipping": [1.0, "auto"],
    "torch_autocast": {"enabled": BOOLS, "dtype": DTYPES}, "steps_per_print": [10], "wall_clock_breakdown": BOOLS,
    "zero_allow_untested_optimizer": BOOLS, "prescale_gradients": BOOLS,
}


def _hf_deepspeed() -> st.SearchStrategy[Any]:
    """HF `deepspeed`: a path, an inline dict, a JSON string, a base64 JSON string, or something else."""
    inline = _doc(DEEPSPEED)
    return st.one_of(
        PATHS, inline,
        inline.map(json.dumps),
        inline.map(lambda d: base64.b64encode(json.dumps(d).encode()).decode()),
        inline.map(lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).decode()),
        st.sampled_from(['{"fp16": {"enabled": ', "{", "eyJmcDE2Ijp7fX0=", "e30=", "bnVsbA==", "W10=", "!!!!!!!!", "ZZZZZZZZZZ"]),
        ODD,
    )


HF = {
    "output_dir": ["out", "/tmp/out"], "bf16": BOOLS, "fp16": BOOLS, "per_device_train_batch_size": COUNTS,
    "gradient_accumulation_steps": COUNTS, "learning_rate": [2e-5], "deepspeed": _hf_deepspeed(), "torch_dtype": DTYPES + ["float64"],
    "dtype": DTYPES, "optim": ["adamw_torch", "adamw_anyprecision", "adamw_bnb_8bit"], "fsdp": ["full_shard auto_wrap", "", True],
    "tf32": BOOLS, "bf16_full_eval": BOOLS, "fp16_full_eval": BOOLS, "do_train": BOOLS, "do_eval": BOOLS, "use_peft": BOOLS,
    "lora_r": [8, 16], "adapter": ["lora", "qlora", None], "attn_implementation": ["flash_attention_2", "sdpa"],
    "flash_attention": BOOLS, "model_name_or_path": ["meta-llama/Llama-2-7b-hf"], "half_precision_backend": ["auto", "apex"],
    # axolotl
    "base_model": ["NousResearch/Llama-2-7b-hf"], "datasets": [[{"path": "x", "type": "alpaca"}]], "micro_batch_size": COUNTS,
    "sequence_len": [2048], "load_in_8bit": BOOLS, "bfloat16": BOOLS, "float16": BOOLS,
}
ACCELERATE = {
    "compute_environment": ["LOCAL_MACHINE", "AMAZON_SAGEMAKER"],
    "distributed_type": ["DEEPSPEED", "FSDP", "MULTI_GPU", "NO", "deepspeed", "MEGATRON_LM", "TPU"],
    "mixed_precision": ["bf16", "fp16", "no", "fp8", "BF16", None, False], "num_processes": [1, 8, 0, -1], "num_machines": [1],
    "machine_rank": [0], "downcast_bf16": ["no", "yes"], "use_cpu": BOOLS, "gpu_ids": ["all", "0,1"],
    "deepspeed_config": {"deepspeed_config_file": PATHS, "zero_stage": [0, 2, 3], "gradient_accumulation_steps": COUNTS,
                         "offload_optimizer_device": ["none", "cpu"], "zero3_init_flag": BOOLS},
    "fsdp_config": {"fsdp_sharding_strategy": ["FULL_SHARD", 1], "fsdp_offload_params": BOOLS},
}
STRATEGY = st.one_of(
    _value(["ddp", "fsdp", "deepspeed", "deepspeed_stage_3", "deepspeed_stage_2_offload", "auto", "single_device", "dp", "xla"]),
    _doc({"class_path": ["lightning.pytorch.strategies.DeepSpeedStrategy", "lightning.pytorch.strategies.FSDPStrategy", "DDPStrategy"],
          "init_args": {"stage": [1, 2, 3, "3"], "config": PATHS, "offload_optimizer": BOOLS}}),
)
LIGHTNING_PRECISIONS = ["bf16-mixed", "16-mixed", "bf16-true", "16-true", "32-true", "64-true", "32", "16", "bf16", 16, 32, 64,
                        "transformer-engine", "transformer-engine-float16", "bf16_mixed", "mixed", 8]
LIGHTNING_TRAINER = {"precision": LIGHTNING_PRECISIONS, "strategy": STRATEGY, "devices": [1, 2, 8, "auto", -1, "0,1"],
                     "num_nodes": [1, 2, 0], "accumulate_grad_batches": [1, 4, 0], "accelerator": ["gpu", "cpu"], "max_epochs": [3],
                     "plugins": [None, ["bitsandbytes"]]}
LIGHTNING = {"trainer": LIGHTNING_TRAINER, "model": {"class_path": ["x.Model"]}, "seed_everything": [42]}
LITGPT = {"precision": LIGHTNING_PRECISIONS, "checkpoint_dir": ["checkpoints/x"], "out_dir": ["out"], "devices": [1, 4, "auto"],
          "num_nodes": [1, 2], "train": {"global_batch_size": [16], "micro_batch_size": [1]}, "strategy": STRATEGY}
TORCHTUNE = {
    "dtype": DTYPES + ["fp64"], "gradient_accumulation_steps": COUNTS,
    "model": {"_component_": ["torchtune.models.llama3.lora_llama3_8b", "torchtune.models.llama2.llama2_7b", "x.dora"]},
    "optimizer": {"_component_": ["torch.optim.AdamW", "torchao.optim.AdamW8bit", "x.KahanAdamW"], "bf16_stochastic_round": BOOLS,
                  "use_kahan_summation": BOOLS},
    "tokenizer": {"_component_": ["torchtune.models.llama3.llama3_tokenizer"], "path": PATHS},
}
NEOX = {
    "precision": ["bfloat16", "fp16", "fp32", "bf16", "half", "float32", "int8"], "num_layers": [2, 32], "hidden_size": [64, 4096],
    "num_attention_heads": [8], "pos_emb": ["rotary", "learned", "alibi"], "fp32_allreduce": BOOLS, "max_position_embeddings": [2048, 0],
    "seq_length": [2048, 4096], "rotary_pct": [0.25], "pipe_parallel_size": [1], "model_parallel_size": [1], "train_iters": [100],
    "fp16": HALF_BLOCK, "bf16": {"enabled": BOOLS}, "zero_optimization": {"stage": [0, 1, 2]}, "gradient_accumulation_steps": COUNTS,
    "train_micro_batch_size_per_gpu": COUNTS, "communication_data_type": DTYPES, "data_types": {"grad_accum_dtype": DTYPES},
}
SIMPLETUNER_FLAGS = {
    "--mixed_precision": ["bf16", "fp16", "no", "fp8"], "--gradient_precision": ["fp32", "unmodified"],
    "--optimizer": ["adamw_bf16", "adamw", "optimi-stableadamw", "bnb-lion8bit"], "--model_type": ["lora", "full"],
    "--model_family": ["flux", "sdxl"], "--gradient_accumulation_steps": COUNTS, "--train_batch_size": COUNTS,
    "--pretrained_model_name_or_path": ["black-forest-labs/FLUX.1-dev"], "--base_model_precision": ["int8-quanto", "no_change"],
}
H2O = {
    "architecture": {"backbone_dtype": ["float16", "bfloat16", "float32", "int8", "int4"], "gradient_checkpointing": BOOLS},
    "environment": {"mixed_precision": BOOLS, "mixed_precision_dtype": ["float16", "bfloat16"], "gpus": [["0"], ["0", "1"], []]},
    "training": {"lora": BOOLS, "grad_accumulation": COUNTS, "optimizer": ["AdamW", "SGD"]},
    "dataset": {"text_column": ["x"]}, "tokenizer": {"max_length": [512]}, "problem_type": ["text_causal_language_modeling"],
}
LAUNCHER = {"resources": {"accelerators": ["V100:8", "A100:8", "T4", "H100:8", "p3.16xlarge"], "cloud": ["aws"]},
            "instance_type": ["ml.p3.16xlarge", "ml.g5.48xlarge"], "gpu_type": ["v100", "a100"]}

# framework -> (document strategy, file names it is written under)
FRAMEWORKS: dict[str, tuple[st.SearchStrategy[Any], list[str]]] = {
    "deepspeed": (schema_docs(DEEPSPEED, ("train_micro_batch_size_per_gpu",)), ["ds_config.json", "zero3.json", "ds_config.yaml", "deepspeed"]),
    "hf": (schema_docs(HF, ("output_dir", "per_device_train_batch_size", "deepspeed")), ["args.json", "training_args.yaml", "trainer.yml"]),
    "axolotl": (schema_docs(HF, ("base_model", "micro_batch_size", "bf16")), ["axolotl.yaml", "lora.yml"]),
    "accelerate": (schema_docs(ACCELERATE, ("compute_environment", "distributed_type")), ["default_config.yaml", "accelerate.yaml"]),
    "lightning": (schema_docs(LIGHTNING, ("trainer",)), ["config.yaml", "fit.yaml"]),
    "litgpt": (schema_docs(LITGPT, ("precision", "checkpoint_dir", "devices")), ["lora.yaml", "finetune.yml"]),
    "torchtune": (schema_docs(TORCHTUNE, ("dtype", "model", "optimizer")), ["8B_lora_single_device.yaml", "7B_full.yaml"]),
    "neox": (schema_docs(NEOX, ("precision", "num_layers", "hidden_size", "pos_emb")), ["125M.yml", "local_setup.yml"]),
    "simpletuner": (schema_docs(SIMPLETUNER_FLAGS, ("--mixed_precision", "--model_type")), ["config.json", "config.yaml"]),
    "h2o": (schema_docs(H2O, ("architecture", "environment", "training")), ["cfg.yaml"]),
    "launcher": (schema_docs(LAUNCHER), ["sky.yaml", "launch.yml"]),
}

# --- serialisation ----------------------------------------------------------------------------------


def _json_text(data: Any, indent: int | None) -> str:
    return json.dumps(data, indent=indent, ensure_ascii=False, default=str)


def _yaml_text(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=10**6)


@st.composite
def yaml_with_anchors(draw: st.DrawFn, data: dict[str, Any]) -> str:
    """`data` as YAML where a block is shared through an anchor: an alias, a merge key, a merge of a list of aliases,
    or a merge of something that is no mapping (PyYAML refuses it with a line)."""
    blocks = [k for k, v in data.items() if isinstance(k, str) and isinstance(v, dict) and v]
    key = draw(st.sampled_from(blocks)) if blocks else "_defaults"
    shared = data.get(key) if blocks else {"enabled": True}
    text = _yaml_text({"_shared": shared}).replace("_shared:", "_shared: &s", 1)
    rest = {k: v for k, v in data.items() if k != key}
    form = draw(st.sampled_from(["alias", "merge", "merge-list", "merge-scalar", "alias-list", "undefined-alias"]))
    extra = draw(st.sampled_from(["", "  enabled: false\n", "  stage: four\n"]))
    use = {"alias": f"{key}: *s\n", "merge": f"{key}:\n  <<: *s\n{extra}", "merge-list": f"{key}:\n  <<: [*s, *s]\n{extra}",
           "merge-scalar": f"{key}:\n  <<: 5\n", "alias-list": f"{key}: [*s, *s, *s]\n", "undefined-alias": f"{key}: *nope\n"}[form]
    return text + (_yaml_text(rest) if rest else "") + use


@st.composite
def serialized(draw: st.DrawFn, data: Any, name: str) -> bytes:
    """`data` written as the file `name` would be, then perhaps damaged: duplicated keys, a BOM, CRLF, a cut, garbage."""
    yaml_like = name.endswith((".yaml", ".yml")) or ("." not in name and draw(st.booleans()))
    if yaml_like:
        form = draw(st.sampled_from(["plain", "plain", "anchors", "duplicate", "multi", "flow"])) if isinstance(data, dict) else "plain"
        if form == "anchors":
            text = draw(yaml_with_anchors(data))
        elif form == "duplicate" and data:
            first = next(iter(data))
            text = _yaml_text(data) + _yaml_text({first: draw(ODD_SCALARS)})  # the same key twice: last wins
        elif form == "multi":
            text = _yaml_text(data) + "---\n" + _yaml_text(draw(st.one_of(ODD, st.just(data))))
        elif form == "flow":
            text = _json_text(data, None)  # JSON is YAML flow style (almost: tabs, NaN, \u escapes of surrogates)
        else:
            text = _yaml_text(data)
    else:
        text = _json_text(data, draw(st.sampled_from([None, 1, 2])))
        if isinstance(data, dict) and data and draw(st.integers(0, 4)) == 0:
            key = json.dumps(str(next(iter(data))))
            text = text.replace("{", "{" + key + ": " + _json_text(draw(ODD_SCALARS), None) + ", ", 1)  # duplicated key
    damage = draw(st.sampled_from(["none"] * 24 + ["bom", "crlf", "cr", "cut", "garbage", "nul", "latin1", "tabs"]))
    if damage == "crlf":
        text = text.replace("\n", "\r\n")
    elif damage == "cr":
        text = text.replace("\n", "\r")
    elif damage == "cut":
        text = text[: draw(st.integers(0, max(len(text) - 1, 0)))]
    elif damage == "garbage":
        text += draw(st.sampled_from(["}", "\n}}}", "\n- x", "\n:::", "\n\x00"]))
    elif damage == "nul":
        text = text.replace(":", ":\x00", 1)
    elif damage == "tabs":
        text = text.replace("  ", "\t")
    raw = text.encode("utf-8", "surrogatepass")
    if damage == "bom":
        raw = b"\xef\xbb\xbf" + raw
    elif damage == "latin1":
        raw = raw + b"\n# caf\xe9\n"
    return raw


# --- files and cases --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One thing in a generated folder. `kind`: file, empty, unreadable (chmod 000), fifo, dangling (symlink to
    nothing), loop (symlink to itself), link (symlink to a sibling), dir (a folder named like a config)."""

    path: str
    kind: str = "file"
    content: bytes = b""


@dataclass
class Case:
    """What to materialise and what to run: `target` is "configs" (lint_config_files on the regular files),
    "tree" (lint_paths on the folder, on each entry named, and lint_config_files on the regular files) or "cli"
    (ampdoctor.cli.main(argv) in-process, with "{root}" in argv replaced by the folder)."""

    generator: str
    entries: list[Entry]
    target: str
    argv: list[str] = field(default_factory=list)
    stdin: str = ""


def _special(name: str) -> Entry:
    kind = {"pipe.json": "fifo", "loop.json": "loop", "dangling.json": "dangling", "dir.json": "dir", "locked.json": "unreadable",
            "empty.json": "empty"}.get(name, "file")
    return Entry(name, kind, b"\x89PNG\r\n\x1a\n\x00\xff\xfe garbage" if name == "garbage.json" else b'{"bf16": {"enabled": true}}')


@st.composite
def framework_files(draw: st.DrawFn, framework: str) -> list[Entry]:
    strategy, names = FRAMEWORKS[framework]
    name = draw(st.sampled_from(names))
    data: Any = draw(strategy)
    shape = draw(st.sampled_from(["dict"] * 12 + ["list", "scalar", "null", "nested-list"]))
    if shape == "list":
        data = [data]
    elif shape == "scalar":
        data = draw(ODD_SCALARS)
    elif shape == "null":
        data = None
    elif shape == "nested-list":
        data = [[data, draw(ODD)]]
    entries = [Entry(name, "file", draw(serialized(data, name)))]
    if framework == "neox" and draw(st.booleans()):
        # NeoX merges the files of a run: a model file plus a partial one holding the precision
        partial = draw(_doc({"precision": NEOX["precision"], "fp16": HALF_BLOCK, "bf16": {"enabled": BOOLS}, "data-path": ["data"]}))
        other = "local_setup.yml" if name != "local_setup.yml" else "125M.yml"
        entries.append(Entry(other, "file", draw(serialized(partial, other))))
    if framework in ("hf", "accelerate", "lightning", "axolotl") and draw(st.booleans()):
        # the DeepSpeed file a launcher or trainer config points at, itself right, wrong or odd
        target = draw(st.sampled_from(["ds_config.json", "zero3.json", "sub/ds_config.json", *SPECIAL_NAMES]))
        if target in SPECIAL_NAMES:
            entries.append(_special(target))
        else:
            ds_data = draw(FRAMEWORKS["deepspeed"][0])
            entries.append(Entry(target, "file", draw(serialized(ds_data, target))))
    return entries


ENV_LINES = st.one_of(
    st.builds(lambda v: f"export MIXED_PRECISION={v}", st.sampled_from(["bf16", "fp16", "no", "'bf16'", '"fp16"', "", "bf16 # x", "$UNSET"])),
    st.builds(lambda v: f'export TRAINER_EXTRA_ARGS="{v}"', st.sampled_from([
        "--gradient_precision=fp32", "--gradient_precision fp32 --optimizer=adamw", "--mixed_precision=fp16 --x", "--",
        "--gradient_precision='fp32", "--a=\\\"b\\\"", "--optimizer adamw_bf16 --gradient_accumulation_steps four"])),
    st.builds(lambda v: f"ACCUMULATE_STEPS={v}", st.sampled_from(["4", "four", "''", "${TRAIN_BATCH_SIZE:-2}", "-1", "99999999999999999999"])),
    st.builds(lambda v: f"export {v}", st.sampled_from(["MODEL_TYPE=lora", "MODEL_FAMILY=flux", "OPTIMIZER=adamw_bf16", "TRAIN_BATCH_SIZE=1",
                                                       "OUTPUT_DIR=/tmp/out", "PRETRAINED_MODEL_NAME_OR_PATH=x"])),
    st.sampled_from(['export TRAINER_EXTRA_ARGS="--open', "export X='unterminated", "X=a\\", "if [ -z \"$X\" ]; then", "fi",
                     "# comment", "", "export =oops", "A=1; B=2", "export LONG=" + "x" * 5000, "X=\x00", "X=$(echo hi)"]),
)


@st.composite
def env_files(draw: st.DrawFn) -> list[Entry]:
    lines = draw(st.lists(ENV_LINES, min_size=1, max_size=8))
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    entries = [Entry(draw(st.sampled_from(["config.env", ".env", "config/config.env"])), "file", eol.join(lines).encode())]
    if draw(st.booleans()):  # SimpleTuner reads config.json next to config.env: the two may disagree
        flags = draw(FRAMEWORKS["simpletuner"][0])
        entries.append(Entry(str(Path(entries[0].path).parent / "config.json"), "file", draw(serialized(flags, "config.json"))))
    return entries


def config_cases(framework: str | None = None) -> st.SearchStrategy[Case]:
    """One framework's config (and what it points at or merges with) in a folder, linted with lint_config_files."""
    names = [framework] if framework else sorted(FRAMEWORKS)
    files = st.one_of(*[framework_files(name) for name in names]) if framework != "env" else env_files()
    if framework is None:
        files = st.one_of(files, env_files())
    return files.map(lambda entries: Case(f"config:{framework or 'any'}", entries, "configs"))


FILE_NAMES = st.one_of(
    st.sampled_from(["a.json", "b.yaml", "c.yml", "d.env", "x.JSON", "noext", "sp ace.json", "\u00fcnic\u00f8de.yaml", "-dash.json",
                     "deep/er/x.json", ".hidden/x.json", "node_modules/ds.json", "a.json.bak", "pyproject.toml", "train.py"]),
    st.builds(lambda n: "n" * n + ".json", st.sampled_from([200, 250])),
)


@st.composite
def odd_entries(draw: st.DrawFn) -> list[Entry]:
    """Files of every odd kind: FIFOs, dangling symlinks, symlink loops, links, folders named x.json, unreadable,
    empty and binary files, BOMs and CRLF."""
    out = []
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["fifo", "dangling", "loop", "link", "dir", "unreadable", "empty", "binary", "bom", "crlf"]))
        name = draw(st.one_of(FILE_NAMES, st.sampled_from(SPECIAL_NAMES)))
        if kind == "binary":
            out.append(Entry(name, "file", draw(st.binary(max_size=64))))
        elif kind in ("bom", "crlf"):
            text = '{"train_micro_batch_size_per_gpu": 1,\n "bf16": {"enabled": true}}\n'
            out.append(Entry(name, "file", b"\xef\xbb\xbf" + text.encode() if kind == "bom" else text.replace("\n", "\r\n").encode()))
        elif kind == "unreadable":
            out.append(Entry(name, "unreadable", b'{"bf16": {"enabled": true}, "train_micro_batch_size_per_gpu": 2}'))
        else:
            out.append(Entry(name, kind))
    return out


def tree_cases() -> st.SearchStrategy[Case]:
    """A folder of configs of several frameworks among odd file kinds, linted as a tree and entry by entry."""
    parts = st.lists(st.one_of(config_cases().map(lambda c: c.entries), odd_entries()), min_size=1, max_size=4)
    return parts.map(lambda groups: Case("tree", [e for g in groups for e in g], "tree"))


# --- CLI ----------------------------------------------------------------------------------------------

RULES = ["AMP001", "AMP004", "grad-scaler-with-bf16", "ALL", "AMP999", "amp001", "", ",", "AMP001,,AMP002", " AMP003 ", "\u00e9",
         "x" * 300]
POLICIES = ["bf16-mixed", "fp16-mixed", "bf16-true", "fp32", "16", "params=fp32,compute=bf16", "params=bf16,params=fp16", "compute=",
            "params=fp128", "=", ",", "", "x" * 500, "loss_scale=static,compute=fp16", "p=bf16,c=bf16,scale=bogus", "\x00"]
ERROR_TEXTS = ['Attempting to unscale FP16 gradients.', "RuntimeError: expected scalar type BFloat16 but found Float",
               '"_amp_foreach_non_finite_check_and_unscale_cuda" not implemented for \'BFloat16\'', "Expected BFloat16, got Float",
               "loss is nan", "", " ", "\x00", "Traceback (most recent call last):\n  File \"x\"", "x" * 20000]
PYPROJECTS = [
    "[tool.ampdoctor]\nselect = ['AMP001']\n", "[tool.ampdoctor]\nselect = 5\n", "[tool.ampdoctor]\nbogus = 1\n", "tool = 3\n",
    "[tool]\nampdoctor = 'x'\n", "[tool.ampdoctor]\nfail-on = 'never'\n", "[tool.ampdoctor]\njobs = -1\n",
    "[tool.ampdoctor]\nper-file-ignores = {'*' = 'AMP001'}\n", "[tool.ampdoctor]\nper-file-ignores = ['x']\n",
    "[tool.ampdoctor]\nexclude = [1]\n", "[tool.ampdoctor\n", "\xff\xfe", "[tool.ampdoctor]\nper-file-ignores = {'*' = ['AMP999']}\n",
    "[tool.ampdoctor]\nextend-select = 'AMP119'\nignore = ['grad-scaler-with-bf16']\n",
]


def _opt(flag: str, values: st.SearchStrategy[str]) -> st.SearchStrategy[list[str]]:
    return st.one_of(st.builds(lambda v: [flag, v], values), st.builds(lambda v: [f"{flag}={v}"], values), st.just([flag]))


TARGET_PATHS = st.sampled_from(["{root}", "{root}/ds_config.json", "{root}/args.json", "{root}/missing.json", "{root}/pipe.json",
                                "{root}/loop.json", "{root}/dir.json", "{root}/locked.json", "{root}/pyproject.toml", "", "-", "\x00",
                                "{root}/" + "n" * 300, "{root}/train.py"])
BASELINE_PATHS = st.sampled_from(["{root}/baseline.json", "{root}/ds_config.json", "{root}/dir.json", "{root}/missing/b.json",
                                  "{root}/garbage.json", "{root}/" + "b" * 300, "{root}/pipe.json", "\x00"])
OUT_PATHS = st.sampled_from(["{root}/out.txt", "{root}/dir.json", "{root}/missing/out.txt", "{root}/ds_config.json", "/dev/null", "", "\x00",
                             "{root}/" + "o" * 300])


@st.composite
def cli_argvs(draw: st.DrawFn) -> list[str]:
    command = draw(st.sampled_from(["lint"] * 4 + ["explain"] * 2 + ["rules", "export", "export", "usage"]))
    opts: list[list[str]] = []
    fmt = _opt("--format", st.sampled_from(["text", "json", "sarif", "html", "TEXT", ""]))
    output = _opt("--output", OUT_PATHS)
    if command == "lint":
        pool = [fmt, output, _opt("--select", st.sampled_from(RULES)), _opt("--extend-select", st.sampled_from(RULES)),
                _opt("--ignore", st.sampled_from(RULES)), _opt("--per-file-ignores", st.sampled_from(["*:AMP001", "tests/*:AMP004,AMP005", ":",
                                                                                                     "*:", ":AMP001", "[:AMP001", "*:AMP999"])),
                _opt("--fail-on", st.sampled_from(["error", "warning", "info", "never"])), st.just(["--exit-zero"]), st.just(["--statistics"]),
                _opt("--baseline", BASELINE_PATHS), _opt("--write-baseline", BASELINE_PATHS),
                _opt("--jobs", st.sampled_from(["1", "0", "-3", "x", "99999999999999999999"])),
                _opt("--config", st.sampled_from(["{root}/pyproject.toml", "{root}/missing.toml", "{root}/dir.json", "{root}/ds_config.json",
                                                   "{root}/" + "c" * 300, "{root}/pipe.json", "{root}/loop.json", "\x00"])),
                st.just(["--no-config"]), st.just(["--full"])]
        opts = draw(st.lists(st.sampled_from(pool).flatmap(lambda s: s), max_size=5))
        paths = draw(st.lists(TARGET_PATHS, max_size=3))
        return ["lint", *[a for o in opts for a in o], *(["--"] if paths and draw(st.booleans()) else []), *paths]
    if command == "explain":
        pool = [fmt, output, _opt("--limit", st.sampled_from(["0", "-1", "3", "x", "10000000000"])), st.just(["--all"]),
                _opt("--file", st.sampled_from(["{root}/log.txt", "{root}/missing.txt", "{root}/dir.json", "{root}/garbage.json",
                                                "{root}/locked.json", "{root}/" + "f" * 300, "\x00"]))]
        opts = draw(st.lists(st.sampled_from(pool).flatmap(lambda s: s), max_size=4))
        texts = draw(st.lists(st.one_of(st.sampled_from(ERROR_TEXTS), st.text(max_size=40), st.just("-")), max_size=3))
        return ["explain", *[a for o in opts for a in o], *texts]
    if command == "rules":
        rule = draw(st.lists(st.sampled_from(RULES + ["AMP004", "grad-dtype-mismatch"]), max_size=2))
        return ["rules", *rule, *draw(st.one_of(st.just([]), _opt("--format", st.sampled_from(["text", "json", "sarif"])), output))]
    if command == "export":
        parts = [_opt("--policy", st.sampled_from(POLICIES)), _opt("--to", st.sampled_from(["deepspeed", "hf", "accelerate", "lightning", "fsdp",
                                                                                          "neox", "torchtune", "simpletuner", "DEEPSPEED"])),
                 output]
        chosen = draw(st.lists(st.sampled_from(parts).flatmap(lambda s: s), min_size=0, max_size=3))
        return ["export", *[a for o in chosen for a in o]]
    # usage errors of every command, including those that need torch: argparse refuses them before any work
    return draw(st.sampled_from([
        [], ["--version"], ["-h"], ["lint", "-h"], ["policy"], ["bogus", "x"], ["--bogus"], ["audit"], ["audit", "--seq-len", "x"],
        ["compare", "--reference", "fp8"], ["rope", "--head-dim", "x"], ["run", "--max-steps", "two"], ["env", "--format", "sarif"],
        ["export"], ["export", "--to", "deepspeed"], ["lint", "--fail-on"], ["explain", "--limit"], ["rules", "a", "b"],
        ["lint", "--format", "html"], ["\x00"], ["-"], ["--"],
    ]))


def cli_cases() -> st.SearchStrategy[Case]:
    """An argv for `ampdoctor lint/explain/rules/export` (or a usage error of any command) over a small folder of
    configs, odd kinds and pyproject.toml variants."""

    @st.composite
    def build(draw: st.DrawFn) -> Case:
        entries = [Entry("ds_config.json", "file", b'{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "fp16": {"enabled": true}}'),
                   Entry("log.txt", "file", draw(st.sampled_from(ERROR_TEXTS)).encode("utf-8", "surrogatepass"))]
        entries += draw(config_cases().map(lambda c: c.entries))
        entries += [_special(n) for n in draw(st.lists(st.sampled_from(SPECIAL_NAMES), max_size=3, unique=True))]
        if draw(st.booleans()):
            entries.append(Entry("pyproject.toml", "file", draw(st.sampled_from(PYPROJECTS)).encode("latin-1")))
        if draw(st.integers(0, 5)) == 0:
            entries.append(Entry("train.py", "file", b"import torch\nscaler = torch.cuda.amp.GradScaler()\nx = y.bfloat16()\n"))
        seen: set[str] = set()
        unique = [e for e in entries if not (e.path in seen or seen.add(e.path))]
        return Case("cli", unique, "cli", draw(cli_argvs()), draw(st.sampled_from(["", "Expected BFloat16, got Float", "\x00"])))

    return build()


# --- running a case ---------------------------------------------------------------------------------


class Hang(BaseException):
    """Raised in the case when it outlives its bound (a BaseException: no `except Exception` in the code under test
    may take it for an input error)."""


@contextlib.contextmanager
def time_bound(seconds: float) -> Iterator[None]:
    """Interrupt the block with `Hang` after `seconds` (SIGALRM, main thread only); an interval timer already running
    (pytest-timeout's) is put back with the time it has left."""
    if not hasattr(signal, "setitimer") or sys.platform == "win32":
        yield
        return
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def fire(signum: int, frame: Any) -> None:
        raise Hang(f"over {seconds} s")

    start = time.monotonic()
    previous = signal.signal(signal.SIGALRM, fire)
    outer, _ = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer:
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - start), 0.001))


def materialise(root: Path, entries: list[Entry]) -> None:
    for entry in entries:
        path = root / entry.path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if os.path.lexists(path):
                continue
            if entry.kind == "fifo":
                os.mkfifo(path)
            elif entry.kind == "dangling":
                path.symlink_to(root / "nowhere" / "x.json")
            elif entry.kind == "loop":
                path.symlink_to(path)
            elif entry.kind == "link":
                path.symlink_to(root / "ds_config.json")
            elif entry.kind == "dir":
                path.mkdir()
                (path / "inner.json").write_text('{"train_micro_batch_size_per_gpu": 1}')
            else:
                path.write_bytes(b"" if entry.kind == "empty" else entry.content)
                if entry.kind == "unreadable":
                    path.chmod(0)
        except OSError as exc:
            if exc.errno not in (36,):  # ENAMETOOLONG: a name the file system refuses is simply not created
                raise


@dataclass
class Outcome:
    seconds: float = 0.0
    exception: str | None = None
    hang: bool = False
    violations: list[str] = field(default_factory=list)
    exit_codes: list[int] = field(default_factory=list)
    findings: int = 0  # over every report of the case: evidence that the generated input reached the rules
    input_errors: int = 0

    @property
    def ok(self) -> bool:
        return self.exception is None and not self.hang and not self.violations

    def describe(self, case: Case) -> str:
        what = self.exception or ("hang" if self.hang else "; ".join(self.violations))
        return f"{case.generator} {case.argv!r} entries={[(e.path[:60], e.kind, e.content[:200]) for e in case.entries]}\n{what}"


def check_report(report: Report, root: Path, out: Outcome) -> None:
    """Invariants of any lint report over generated input."""
    out.findings += len(report.findings)
    out.input_errors += len(report.errors)
    for error in report.errors:
        if not error.file:
            out.violations.append(f"an input error names no file: {error.message[:200]!r}")
        if len(error.message) > MAX_MESSAGE:
            out.violations.append(f"an input error of {len(error.message)} characters (a value echoed whole): {error.message[:200]!r}")
        if error.message.startswith(("invalid JSON", "unterminated quote")) and error.line is None:
            out.violations.append(f"a syntax error without its line: {error}")
        if error.message.startswith("`") and error.line is None and error.file.endswith((".json", ".yaml", ".yml")):
            out.violations.append(f"a value error without its line: {error}")
        if error.message.startswith("cannot interpret this "):  # the catch-all around readers: a reader failed on a value
            out.violations.append(f"a reader failure passed through: {error}")
        if error.message.startswith("cannot parse "):  # the catch-all for parser failures: each should be said with its line
            out.violations.append(f"a parser failure passed through: {error}")
        if "\n" in error.message:
            out.violations.append(f"a multi-line input error: {error.message[:300]!r}")
        if "Traceback" in error.message:
            out.violations.append(f"a traceback in an input error: {error.message[:300]!r}")
    for finding in report.findings:
        if not finding.location.file:
            out.violations.append(f"a finding without a file: {finding.rule_id}")
    for fmt in ("text", "json", "sarif"):
        write_report(report, fmt, io.StringIO())


def _regular_files(root: Path, entries: list[Entry]) -> list[Path]:
    out = []
    for entry in entries:
        path = root / entry.path
        try:
            if stat.S_ISREG(path.lstat().st_mode):
                out.append(path)
        except OSError:
            continue
    return sorted(set(out))


def _run_cli(case: Case, root: Path, out: Outcome) -> None:
    from ampdoctor.cli import main

    argv = [a.replace("{root}", str(root)) for a in case.argv]
    stdout, stderr = io.StringIO(), io.StringIO()
    saved_stdin, cwd = sys.stdin, os.getcwd()
    sys.stdin = io.StringIO(case.stdin)
    os.chdir(root)
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                code: Any = main(argv)
            except SystemExit as exc:  # argparse: usage errors exit 2, --help and --version 0
                code = exc.code
    finally:
        sys.stdin = saved_stdin
        os.chdir(cwd)
    text = stdout.getvalue() + stderr.getvalue()
    out.exit_codes.append(code if isinstance(code, int) else -1)
    if not isinstance(code, int) or code not in (0, 1, 2):
        out.violations.append(f"exit code {code!r} outside 0/1/2")
    if "Traceback (most recent call last)" in text and not any("Traceback" in a for a in argv) and "Traceback" not in case.stdin:
        out.violations.append(f"a traceback in the output: {text[-1500:]}")
    written = any(a in ("--output", "-o") or a.startswith("--output=") for a in argv)  # the report went to a file
    if code == 2 and not stderr.getvalue().strip() and not stdout.getvalue().strip() and not written:
        out.violations.append("exit 2 without a word")


def _run_lint(case: Case, root: Path, out: Outcome) -> None:
    files = _regular_files(root, case.entries)
    if files:
        check_report(lint_config_files(files), root, out)
    if case.target == "tree":
        # every entry named, whatever its kind: the public API is handed FIFOs, folders and loops too
        check_report(lint_config_files(sorted({root / e.path for e in case.entries})), root, out)
        check_report(lint_paths([root]), root, out)
        for entry in case.entries[:4]:
            check_report(lint_paths([root / entry.path]), root, out)


def run_case(case: Case, root: Path, bound: float = BOUND_S) -> Outcome:
    """Materialise `case` under `root` (an empty folder) and run it once under `bound` seconds."""
    out = Outcome()
    materialise(root, case.entries)
    start = time.perf_counter()
    try:
        with time_bound(bound * 5):  # a real hang ends here; a slow input is caught by the measured time below
            (_run_cli if case.target == "cli" else _run_lint)(case, root, out)
    except Hang:
        out.hang = True
    except Exception:  # noqa: BLE001 - the point: any exception is a finding
        out.exception = traceback.format_exc(limit=-8)
    out.seconds = time.perf_counter() - start
    if out.seconds > bound:
        out.hang = True
    return out


GENERATORS: dict[str, Callable[[], st.SearchStrategy[Case]]] = {
    **{f"config:{name}": (lambda name=name: config_cases(name)) for name in [*sorted(FRAMEWORKS), "env"]},
    "tree": tree_cases,
    "cli": cli_cases,
}


def explore(name: str, examples: int, record: Callable[[Case, Outcome], None], *, seed: int | None = None, bound: float = BOUND_S) -> None:
    """Draw `examples` cases of generator `name` (no shrinking, no example database) and hand each with its outcome to
    `record`, which decides what a failure means: the bench counts them, a test may raise."""
    import shutil
    import tempfile

    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as with_seed

    base = Path(tempfile.mkdtemp(prefix="ampdoctor-fuzz-"))

    @settings(max_examples=examples, deadline=None, database=None, derandomize=seed is None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(GENERATORS[name]())
    def body(case: Case) -> None:
        root = Path(tempfile.mkdtemp(dir=base))
        try:
            record(case, run_case(case, root, bound))
        finally:
            shutil.rmtree(root, ignore_errors=True)

    try:
        (with_seed(seed)(body) if seed is not None else body)()
    finally:
        shutil.rmtree(base, ignore_errors=True)
