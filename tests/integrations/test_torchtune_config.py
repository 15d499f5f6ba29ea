"""torchtune recipes train pure bf16 on purpose (`dtype: bf16` is the weights' dtype, no autocast): the config lint
must read them so, and speak only where an update can really be lost."""

from __future__ import annotations

from pathlib import Path

from ampdoctor.frameworks import torchtune
from ampdoctor.lint import LintSettings, lint_paths
from ampdoctor.lint.configs import read_configs

RECIPE = """\
model:
  _component_: torchtune.models.llama3_2.llama3_2_1b
dtype: bf16
optimizer:
  _component_: {optimizer}
  lr: 2e-5{extra}
gradient_accumulation_steps: {gas}
loss:
  _component_: torchtune.modules.loss.CEWithChunkedOutputLoss
"""


def recipe(tmp_path: Path, optimizer: str, extra: str = "", gas: int = 1) -> Path:
    path = tmp_path / "full_finetune_single_device.yaml"
    path.write_text(RECIPE.format(optimizer=optimizer, extra=extra, gas=gas))
    return path


def test_stochastic_rounding_recipe_is_pure_bf16_with_fp32_optimizer_state_and_clean(tmp_path):
    path = recipe(tmp_path, "torchao.optim.AdamW", "\n  bf16_stochastic_round: True")
    [reading], _, _ = read_configs([path])
    assert reading.framework == torchtune.NAME
    assert str(reading.policy) == "params=bf16,compute=bf16,output=bf16,grads=bf16,grad_accum=bf16,reduce=bf16,optimizer_state=fp32,loss_scale=none"
    assert reading.facts.optimizer_kind == "stochastic-rounding" and reading.facts.autocast is False
    assert lint_paths([path], LintSettings(select=("ALL",))).findings == ()


def test_plain_adamw_on_bf16_weights_is_quiet_by_default_and_named_when_asked(tmp_path):
    path = recipe(tmp_path, "torch.optim.AdamW")
    assert lint_paths([path]).findings == ()  # pure bf16 is torchtune's design, not a mistake
    [finding] = lint_paths([path], LintSettings(select=("ALL",))).findings
    assert (finding.rule_id, finding.location.line) == ("AMP119", 3)


def test_accumulating_bf16_gradients_is_the_one_note(tmp_path):
    # The recipe sums 4 micro-batches into bf16 .grad (reported at `dtype`, line 3): true of every pure-bf16 recipe, so a note.
    path = recipe(tmp_path, "torchao.optim.AdamW", "\n  bf16_stochastic_round: True", gas=4)
    [finding] = lint_paths([path]).findings
    assert (finding.rule_id, finding.severity.value, finding.location.line) == ("AMP117", "info", 3)
