"""AMP001 precision-config-mismatch: Two layers of the stack disagree on the training precision, so part of the model runs in another dtype.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP001`)."""

from __future__ import annotations

import ast
from collections import Counter
from typing import TYPE_CHECKING, Iterator

from ampdoctor.core.engine import Places
from ampdoctor.core.model import Location, Severity
from ampdoctor.core.registry import Hit, code_check, policy_check, runtime_check
from ampdoctor.dtypes import BF16, FP16, FP32, name_of
from ampdoctor.facts import RunFacts
from ampdoctor.frameworks import accelerate, hf, lightning
from ampdoctor.lint.python.context import CodeHit, Context
from ampdoctor.lint.python.resolve import names_rotary, tokens
from ampdoctor.policy import Policy

if TYPE_CHECKING:
    from ampdoctor.audit.analysis import RuntimeContext

# Parameter names that carry the caller's precision choice.
_PRECISION_PARAMS = frozenset({"precision", "dtype", "mixed_precision", "torch_dtype", "amp_dtype", "compute_dtype", "param_dtype"})


@code_check("AMP001", triggers=("precision = ", "dtype = torch.", 'dtype = "', "dtype = '"), reads_configs=False)
def precision_argument_overwritten(ctx: Context) -> Iterator[CodeHit]:
    # litgpt PR #1802: `precision = "32-true"` after the `if precision is None:` default, so whatever the caller asked
    # for, the model ran in fp32. An unconditional constant assignment to the parameter, before anything but a
    # None-check reads it, throws the caller's choice away.
    # Start from the (indexed) assignments, so that a file with no such statement costs nothing more.
    for stmt in ctx.src.assigns:
        fn = ctx.src.parents.get(stmt)
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or stmt not in fn.body:
            continue
        params = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
        name = _constant_assignment(stmt, params)
        if name is None or any(_reads_beyond_a_default(s, {name}) for s in fn.body[: fn.body.index(stmt)]):
            continue
        said = (f"`{name}` is overwritten with `{ast.unparse(stmt.value)[:30]}` before it is used: whatever precision "
                f"the caller of `{fn.name}` passes is ignored")
        rotary = _rotary_owner(ctx, fn)
        if rotary is not None and ctx.flow.dtype_of(stmt.value) == {FP32}:
            # fp32 is the precision a rotary table belongs in: a half choice of the caller is lost for the better
            yield stmt, (f"{said}; it is fp32 in `{rotary}`, a rotary embedding, whose tables belong in fp32: only the "
                         "caller's choice is lost, no precision"), Severity.INFO
            continue
        # a warning: the constant may be the safer precision (fp32 rotary), but the caller is not told
        yield stmt, said, Severity.WARNING


def _rotary_owner(ctx: Context, fn: ast.AST) -> str | None:
    """The function, or the class whose method it is, when its name says rotary embedding (``RotaryEmbedding``,
    ``RotaryPositionMultiHeadedAttention.__init__``, ``build_rope``)."""
    owner = ctx.src.parents.get(fn)
    for node in (fn, owner):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and names_rotary(node.name):
            return node.name
    return None


def _constant_assignment(stmt: ast.stmt, params: set[str]) -> str | None:
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        name = stmt.targets[0].id
        value = stmt.value
        is_constant = (isinstance(value, ast.Constant) and isinstance(value.value, str)) or \
                      (isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and value.value.id == "torch")
        if name in params and tokens(name) & _PRECISION_PARAMS | ({name} & _PRECISION_PARAMS) and is_constant:
            return name
    return None


def _reads_beyond_a_default(stmt: ast.stmt, params: set[str]) -> bool:
    """Does `stmt` use a precision parameter other than to fill in its default (``if precision is None: ...``)?"""
    if isinstance(stmt, ast.If) and isinstance(stmt.test, ast.Compare) and isinstance(stmt.test.left, ast.Name) \
            and isinstance(stmt.test.ops[0], ast.Is) and all(isinstance(s, ast.Assign) for s in stmt.body) and not stmt.orelse:
        return False
    if isinstance(stmt, (ast.Expr,)) and isinstance(stmt.value, ast.Constant):
        return False  # a docstring
    return any(isinstance(n, ast.Name) and n.id in params and isinstance(n.ctx, ast.Load)
               and (tokens(n.id) & _PRECISION_PARAMS or n.id in _PRECISION_PARAMS) for n in ast.walk(stmt))


# DeepSpeed engine mode -> what a launcher asks for to get it.
_ASKED_FOR = {"bf16": "bf16", "fp16": "fp16", "amp": "fp16", "fp32": "no"}
_SPELLED = {"no": "fp32 (no mixed precision)", "bf16": "bf16", "fp16": "fp16"}


@policy_check("AMP001")
def precision_config_mismatch(policy: Policy | None, facts: RunFacts, at: Places) -> Iterator[Hit]:
    yield from _autocast_with_half_engine(facts, at)
    yield from _launch_refused(facts, at)
    yield from _launcher_against_engine(facts, at)
    yield from _model_against_engine(facts, at)
    for conflict in facts.conflicts:
        here, there = conflict.where[0], conflict.where[1]
        # Nothing refuses it: SimpleTuner reads the one file CONFIG_BACKEND names, and the run trains in that file's dtype.
        yield Hit(f"{conflict.setting}={conflict.values[0]!r} here but {conflict.values[1]!r} in {there.file}: the run reads one of them "
                  "(SimpleTuner: CONFIG_BACKEND), so its weight dtype depends on which", here, severity=Severity.WARNING, related=(there,))


def _autocast_with_half_engine(facts: RunFacts, at: Places) -> Iterator[Hit]:
    if facts.engine_autocast and facts.engine_precision in ("bf16", "fp16"):
        # DeepSpeed 0.17.2 to 0.18.2 assert ("Cannot enable both torch autocast and bfloat16"); from 0.18.3 (#7700) the
        # engine casts the weights to the half type and autocasts on top: the run starts, with half weights.
        here = at("engine_autocast")
        yield Hit(f"torch_autocast is enabled together with the {facts.engine_precision} block: DeepSpeed 0.17.2 to 0.18.2 refuse the pair "
                  f"('Cannot enable both torch autocast and {'bfloat16' if facts.engine_precision == 'bf16' else 'fp16'}'), later versions cast "
                  "the weights to the half type instead of keeping the fp32 parameters autocast expects", here,
                  severity=Severity.WARNING, related=at.others(here, f"{facts.engine_precision}_mode"))


def _launch_refused(facts: RunFacts, at: Places) -> Iterator[Hit]:
    if facts.launch_refused != "mixed_precision":
        return
    # A warning: the command line decides. `accelerate launch --config_file` with this YAML and no `--mixed_precision`
    # stops before training; with it, the flag's value fills the DeepSpeed file and this key is never read.
    here = at("launch_refused")
    yield Hit("`accelerate launch` refuses `mixed_precision` in a config that names a `deepspeed_config_file` unless "
              "`--mixed_precision` is given on its command line ('When using `deepspeed_config_file`, the following "
              "accelerate config variables will be ignored: [..., 'mixed_precision']'), and given there it overrides this "
              "value: remove this key and set the precision in the DeepSpeed file (or pass `--mixed_precision`)", here,
              severity=Severity.WARNING, related=at.others(here, "deepspeed_config_file"))


def _launcher_against_engine(facts: RunFacts, at: Places) -> Iterator[Hit]:
    asked, runs = facts.requested_precision, _ASKED_FOR.get(facts.engine_precision or "")
    if asked is None or runs is None or asked == runs:
        return
    launcher = (facts.framework or "the launcher").removesuffix("+deepspeed")
    engine_at = at("engine_file")
    if runs == "bf16" and at.has("legacy_bf16_block") and launcher in (accelerate.NAME, hf.NAME):
        yield from _legacy_bf16_block_shadowed(launcher, asked, engine_at, at)
        return
    fails, why = _refusal(launcher, asked, runs, facts)
    here = at("requested_precision")
    # accelerate refuses only the opposite half type (`DeepSpeedPlugin.set_mixed_precision`) and otherwise leaves a
    # written block on: the run trains in another dtype than asked, without failing. Lightning refuses nothing: it
    # adds the block it asks for only where the file has no such key (`_format_precision_config`), so the opposite
    # half type ends with both blocks on (DeepSpeed refuses that) and otherwise the file's dtype runs (a model fed
    # float inputs then fails at its first layer, one fed token ids does not). The HF Trainer refuses any written
    # value that disagrees with what it checks it against (`_refusal`).
    quiet = not fails
    # A `deepspeed` key of the project's own (its own option, handed to `deepspeed.initialize` by its own code) reaches
    # the Trainer's checks only if the project passes it on: a refusal that depends on that is a warning that says so.
    # So is one of a launcher that asks by its defaults: a config that writes none of its precision keys leaves them
    # to what the run is started with (the Trainer's flags given on the command line beside the file).
    maybe = "" if facts.framework_known is not False else \
        f"if {launcher} reads this config (the project's own code declares this `deepspeed` option and calls deepspeed.initialize itself): "
    if facts.requested_by_default:
        maybe += f"unless the run sets {launcher}'s precision elsewhere (this config writes none of its precision keys, and the command line or code may): "
        quiet = True
    yield Hit(f"{maybe}{launcher} asks for {_SPELLED[asked]} but the DeepSpeed config {engine_at.file} it points to runs {_SPELLED[runs]}{why}",
              here, related=at.others(here, engine_at, "reference"),
              severity=Severity.WARNING if quiet or facts.framework_known is False else None)


_HALF_OF = {"bf16": BF16, "fp16": FP16}


def _refusal(launcher: str, asked: str, runs: str, facts: RunFacts) -> tuple[bool, str]:
    """(whether the run fails: the launcher or DeepSpeed refuses the pair; why, in words for the message)."""
    refused = {asked, runs} == {"bf16", "fp16"}
    if refused and launcher == lightning.NAME and facts.asked_block_written:
        # `_format_precision_config` adds Lightning's block only where the file has no such key: the file's runs.
        return False, (f": Lightning adds its {asked} block only where the file has none and this file writes one, so the engine runs "
                       f"the file's {runs} while Lightning casts float inputs to {asked}")
    if refused and launcher == lightning.NAME:
        return True, f" (Lightning adds its {asked} block beside the file's and DeepSpeed refuses both on)"
    if refused:
        return True, f" ({launcher} refuses the opposite half type)"
    if launcher == hf.NAME and asked == "no" and facts.eval_dtype is not None and facts.eval_dtype == _HALF_OF.get(runs):
        # `trainer_config_process` matches `bf16.enabled` against `bf16 or bf16_full_eval` (fp16 likewise): no refusal.
        return False, (f": the Trainer checks the file's {runs} block against {runs}_full_eval, which is on, so it does not refuse "
                       f"the file, and training runs the engine's {runs}")
    if launcher == hf.NAME:
        return True, " (the HF Trainer refuses a written DeepSpeed value that disagrees with its arguments)"
    return launcher not in (accelerate.NAME, lightning.NAME), ": the engine's dtype, not the launcher's, is what the model gets"


def _legacy_bf16_block_shadowed(launcher: str, asked: str, engine_at: Location, at: Places) -> Iterator[Hit]:
    """The DeepSpeed file enables bf16 with the legacy `bfloat16` key. Neither the HF Trainer nor accelerate refuses
    it: the Trainer's `trainer_config_process` compares only `bf16.enabled` (`fill_match`, which skips a key the file
    does not have), and accelerate's `DeepSpeedPlugin.set_mixed_precision` (which the Trainer reaches through
    `AcceleratorState`) checks only the `bf16`/`fp16` keys, then writes `"bf16": {"enabled": <asked is bf16>}` where
    the file has no `bf16` key. DeepSpeed reads `bf16` before `bfloat16` (`get_bfloat16_config`), so the file's block
    is switched off and the run trains in what the launcher asks, without failing."""
    here = at("requested_precision")
    yield Hit(f"{launcher} asks for {_SPELLED[asked]} and the DeepSpeed config {engine_at.file} it points to enables bf16 only under the "
              "legacy `bfloat16` key: accelerate adds a `bf16` key beside it ({\"enabled\": false}) and DeepSpeed reads `bf16` first, "
              f"so the file's bf16 is ignored and the run trains in {_SPELLED[asked]}", here,
              related=at.others(here, engine_at, "reference"), severity=Severity.WARNING)


def _model_against_engine(facts: RunFacts, at: Places) -> Iterator[Hit]:
    """The model is built in one dtype while the engine runs another (GPT-NeoX `precision` vs its DeepSpeed blocks)."""
    engine = {"bf16": BF16, "fp16": FP16, "amp": FP16, "fp32": FP32}.get(facts.engine_precision or "")
    if engine is None or facts.model_dtype_declared is None:
        return
    rotary = " NeoX's rotary embedding and attention then run in fp32 while DeepSpeed feeds bf16 activations " \
             "(incident 1: 'expected scalar type BFloat16 but found Float')." if facts.rotary_table_dtype is not None or at.has("rotary_table_dtype") else ""
    # NeoX refuses both of these at start-up (`validate_types`: a `precision` outside its Literal; `calculate_derived`:
    # "DeepSpeed bf16 field was set but precision conflicts"), but only a config NeoX reads: one recognised by the keys
    # Megatron-LM and other trainers share as well is a warning that says so.
    certain = facts.framework_known is not False
    maybe = "" if certain else "if GPT-NeoX reads this config (it is recognised only by keys Megatron-LM and other trainers use too): "
    if facts.model_dtype_declared and facts.model_dtype is None:
        yield Hit(f"{maybe}precision={facts.precision_setting!r} is not one NeoX knows (fp16, bfloat16, fp32): the model and DeepSpeed "
                  "engine dtypes are undefined", at("model_dtype"), severity=None if certain else Severity.WARNING)
    elif not facts.model_dtype_declared and facts.model_dtype is None and engine == BF16 and facts.model_dtype_from_engine is not True:
        # Before gpt-neox PR #1311 an unset `precision` was derived from the fp16 block only: fp32 under a bf16 engine.
        known_old = facts.model_dtype_from_engine is False
        here = at("engine_precision")
        yield Hit("the DeepSpeed bf16 block is enabled but `precision` is unset: "
                  + ("this NeoX derives params_dtype=fp32 from the missing fp16 block" if known_old else
                     "NeoX before PR #1311 (Nov 2024) derives params_dtype=fp32 from the missing fp16 block")
                  + ", so the model is built in fp32 under a bf16 engine." + rotary,
                  here, severity=None if known_old else Severity.WARNING, related=at.others(here, "rotary_table_dtype"),
                  fix='Set `"precision": "bfloat16"` next to the bf16 block (GPT-NeoX derives it only since PR #1311).')
    elif facts.model_dtype is not None and facts.model_dtype != engine:
        yield _model_dtype_against_engine(facts, at, engine, maybe, certain)


def _model_dtype_against_engine(facts: RunFacts, at: Places, engine: str, maybe: str, certain: bool) -> Hit:
    here = at("model_dtype")
    # A half `precision` beside its own block written off (bf16: NeoX keeps a written block since PR #1311, and turned
    # it on from #787 to then): nothing asserts, the run starts, its half weights without an fp32 master.
    off = engine == FP32 and facts.model_dtype in (BF16, FP16)
    why = (" (NeoX keeps the block written off since PR #1311 and refuses nothing: the half weights are stepped without "
           "fp32 master weights; from PR #787 to #1311 it turned the block on)") if off else ""
    return Hit(f"{maybe}precision={facts.precision_setting!r} builds the model in {facts.model_dtype} but the DeepSpeed engine runs "
               f"{facts.engine_precision} ({engine}){why}", here, related=at.others(here, "engine_precision"),
               severity=None if certain and not off else Severity.WARNING)


@runtime_check("AMP001")
def params_against_given_policy(ctx: RuntimeContext) -> Iterator[Hit]:
    """The user said which policy the run follows, and the trainable parameters are in another dtype."""
    observed = ctx.observed.policy
    if not ctx.policy_given or observed is None or observed.params == ctx.policy.params:
        return
    t = ctx.trace
    params = [p for p in t.parameters() if p.requires_grad and p.is_floating_point()]
    off = Counter(name_of(p.dtype) for p in params if name_of(p.dtype) != ctx.policy.params)
    dt, n = off.most_common(1)[0]
    yield Hit(f"the policy says params={ctx.policy.params} but {n} of {len(params)} trainable parameters are {dt}",
              Location(module="", label=f"policy {ctx.policy}"), severity=Severity.WARNING,
              fix=f"Load the model in {ctx.policy.params} (autocast gives compute={ctx.policy.compute}), or audit with --policy params={dt}, "
                  "or leave --policy out to audit the policy the script runs.",
              details={"policy_params": ctx.policy.params, "found": dict(off)})
