"""What kind of code a finding sits in decides whether it is a warning: tests and benchmarks build odd precision
cases on purpose, and a training-only rule (gradients, optimizer, loss scaling) cannot matter in code that never
trains. Each case here is also linted as training code, to show the finding is there and only its kind changes."""

import textwrap
from pathlib import Path

import pytest

from ampdoctor.lint.engine import lint_paths
from ampdoctor.lint.python import lint_source
from ampdoctor.lint.python.kind import CodeKind, file_kind
from ampdoctor.lint.settings import LintSettings

# A GradScaler in a file whose weights are bf16: AMP004, a training-only rule (scope: training).
SCALER = """
import torch

def run(model, batch, optimizer):
    model = model.to(torch.bfloat16)
    scaler = torch.amp.GradScaler("cuda")
    loss = model(batch).mean()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
"""

# A RoPE cache cast to bf16: AMP002, numerics that hurt any run (scope: all).
ROPE_CACHE = """
import torch

class Rotary(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        inv_freq = 1.0 / 10000 ** (torch.arange(0, dim, 2).float() / dim)
        freqs = torch.outer(torch.arange(4096).float(), inv_freq)
        self.cos_cached = freqs.cos().bfloat16()
"""


def findings(code: str, path: str):
    found, error = lint_source(textwrap.dedent(code).lstrip("\n"), path, kind_path=path)
    assert error is None, error
    return found


def one(code: str, path: str, rule: str):
    mine = [f for f in findings(code, path) if f.rule_id == rule]
    assert len(mine) == 1, mine
    return mine[0]


@pytest.mark.parametrize("path, kind", [
    ("tests/test_amp.py", "test"), ("pkg/tests/helpers.py", "test"), ("conftest.py", "test"),
    ("benchmarks/speed.py", "benchmark"), ("bench_attention.py", "benchmark"),
])
def test_every_rule_is_a_note_in_tests_and_benchmarks(path, kind):
    assert one(SCALER, "train.py", "AMP004").severity.value == "error"
    found = one(SCALER, path, "AMP004")
    assert found.severity.value == "info"
    assert f"(in {kind} code:" in found.message
    assert one(ROPE_CACHE, path, "AMP002").severity.value == "info"


def test_a_training_only_rule_is_a_note_in_conversion_and_inference_code():
    plain = SCALER.replace("    scaler.scale(loss).backward()\n    scaler.step(optimizer)\n", "")
    assert one(plain, "scripts/convert_checkpoint.py", "AMP004").severity.value == "info"
    assert "conversion code" in one(plain, "scripts/convert_checkpoint.py", "AMP004").message
    assert one(plain, "inference.py", "AMP004").severity.value == "info"
    # numerics matter in inference too
    assert one(ROPE_CACHE, "inference.py", "AMP002").severity.value == "warning"
    # a script's name joined by hyphens or dots says the same as one joined by underscores
    for path in ("evaluation/eval-llm.py", "scripts/convert-to-hf.py", "run.inference.py"):
        assert one(plain, path, "AMP004").severity.value == "info", path
    assert one(plain, "scripts/eval-llm-train.py", "AMP004").severity.value != "info"  # "train" in the name: it trains
    # a script that plots or visualises results trains nothing
    for path in ("scripts/plot_lattice.py", "tools/visualize_attention.py"):
        assert one(plain, path, "AMP004").severity.value == "info", path
        assert "plots or visualises" in one(plain, path, "AMP004").message


def test_every_rule_is_a_note_in_a_plotting_script():
    # what a plotting script computes is drawn, never trained or served: numerics rules are notes there too
    for path in ("scripts/plot_lattice.py", "tools/visualize_attention.py"):
        found = one(ROPE_CACHE, path, "AMP002")
        assert found.severity.value == "info" and "(in visualisation code:" in found.message, path
    # "vis" also names vision models: a vision encoder's file computes, and keeps its warnings
    assert one(ROPE_CACHE, "models/vis_encoder.py", "AMP002").severity.value == "warning"
    assert file_kind("models/vis_encoder.py", "x = 1").kind is CodeKind.INFERENCE
    assert file_kind("plot_and_train.py", "loss.backward()").kind is CodeKind.TRAINING


def test_a_rule_about_what_a_model_computes_is_a_note_in_conversion_code():
    # `scope: compute` (AMP002): a converter writes the table, it multiplies it into no query; inference computes
    found = one(ROPE_CACHE, "tools/convert_hf_to_meta.py", "AMP002")
    assert found.severity.value == "info" and "computes nothing with them" in found.message
    assert one(ROPE_CACHE, "inference.py", "AMP002").severity.value == "warning"
    assert one(ROPE_CACHE, "model.py", "AMP002").severity.value == "warning"


def test_a_checkpoint_consolidation_tool_is_conversion_code():
    # Gathering sharded checkpoints into one file loads and saves weights; it trains only if it says so.
    assert file_kind("tools/get_consolidated_ckpt.py", "model = FSDP(model)").kind is CodeKind.CONVERSION
    assert file_kind("scripts/consolidate_fsdp_shards.py", "x = 1").kind is CodeKind.CONVERSION
    assert file_kind("consolidate_and_train.py", "loss.backward()").kind is CodeKind.TRAINING


def test_a_file_that_trains_is_training_code_whatever_its_name():
    assert file_kind("generate_and_train.py", "loss.backward()").kind is CodeKind.TRAINING
    assert file_kind("sample.py", "loss.backward()\noptimizer.step()").kind is CodeKind.TRAINING
    assert file_kind("sample.py", "x = 1").kind is CodeKind.INFERENCE


def test_a_file_under_an_evaluation_folder_is_evaluation_code_unless_it_trains():
    # an eval/ folder holds benchmark harnesses and scoring scripts; a file there that steps an optimizer trains
    found = file_kind("src/pkg/eval/embed_queries.py", "x = 1")
    assert found.kind is CodeKind.INFERENCE and "evaluation code under eval/" in found.why
    assert file_kind("evaluation/score.py", "x = 1").kind is CodeKind.INFERENCE
    assert file_kind("src/pkg/eval/probe.py", "loss.backward()\noptimizer.step()").kind is CodeKind.TRAINING
    assert file_kind("src/pkg/evaluator/metrics.py", "x = 1").kind is CodeKind.LIBRARY


def test_a_fit_of_an_estimator_built_in_the_same_expression_trains_nothing_but_a_trainers_does():
    neighbours = "idx = NearestNeighbors(n_neighbors=8).fit(points).kneighbors(points)\nwith torch.autocast('cuda'):\n    y = model(x)"
    assert file_kind("surface/inference.py", neighbours).kind is CodeKind.INFERENCE
    assert file_kind("surface/predict_fields.py", neighbours).kind is CodeKind.INFERENCE
    assert file_kind("fit_model.py", "L.Trainer(max_epochs=1, precision='bf16-mixed').fit(model, loader)").kind is CodeKind.TRAINING
    assert file_kind("run.py", "trainer = L.Trainer()\ntrainer.fit(model)").kind is CodeKind.TRAINING
    assert file_kind("run.py", "build_trainer(cfg).fit(model)").kind is CodeKind.TRAINING


def test_validation_and_sampling_inside_a_training_file_are_evaluation_code():
    code = """
    import torch

    def log_validation(pipe, prompt):
        with torch.autocast("cuda"):
            return pipe(prompt)

    @torch.no_grad()
    def sample_images(pipe):
        with torch.autocast("cuda"):
            return pipe()

    def train(model, batch, optimizer):
        model.to(torch.bfloat16)
        with torch.autocast("cuda"):
            loss = model(batch).mean()
        loss.backward()
        optimizer.step()
        if step % args.validation_steps == 0:
            with torch.autocast("cuda"):
                model(batch)
    """
    found = sorted((f.location.line, f.severity.value) for f in findings(code, "train.py") if f.rule_id == "AMP107")
    assert found == [(4, "info"), (9, "info"), (14, "warning"), (19, "info")]


def test_a_library_function_that_only_measures_a_model_is_evaluation_code():
    # A helper module (it trains nothing itself): the perplexity of a model loaded in fp16, measured with a
    # cross-entropy of its fp16 logits, is a reported number (a note); a loss helper that training may call stays a
    # warning. No-grad code is not read as evaluation here: a library's no-grad rollout computes the old
    # log-probabilities that RL training uses.
    code = """
    import torch
    from torch import nn
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained("org/m", torch_dtype=torch.float16)
    criterion = nn.CrossEntropyLoss()

    def eval_ppl(ids):
        logits = model(ids).logits
        return criterion(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten())

    def lm_loss(ids):
        logits = model(ids).logits
        return criterion(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten())

    @torch.no_grad()
    def rollout(ids):
        logits = model(ids).logits
        return criterion(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten())
    """
    found = sorted((f.location.line, f.severity.value) for f in findings(code, "utils/metrics.py") if f.rule_id == "AMP125")
    assert found == [(10, "info"), (14, "warning"), (19, "warning")]
    noted = [f for f in findings(code, "utils/metrics.py") if f.rule_id == "AMP125" and f.location.line == 10]
    assert "inside `eval_ppl` (line 8), which evaluates a model" in noted[0].message


def test_a_test_a_module_carries_for_itself_is_test_code():
    # A model module's own `_test_x()` (run from its __main__) builds a case on purpose; the module's classes are not
    # tests, and a function merely named like one inside a class is a method.
    code = ROPE_CACHE + """

def _test_rotary():
    freqs = torch.outer(torch.arange(16).float(), torch.ones(4))
    cos_cached = freqs.cos().bfloat16()
    return cos_cached
"""
    found = sorted((f.location.line, f.severity.value) for f in findings(code, "model.py") if f.rule_id == "AMP002")
    assert found == [(8, "warning"), (13, "info")], found
    assert "a test the module carries for itself" in [f for f in findings(code, "model.py") if f.location.line == 13][0].message


def test_a_no_grad_block_is_evaluation_code_only_when_training_uses_nothing_it_makes():
    # A no-grad block that renders or logs is not training; one that steps, updates an EMA in place, stores its
    # result on an object or hands a value to the code after it (a frozen teacher's targets) is part of training.
    code = """
    import torch

    def train(model, ema, teacher, batch, optimizer):
        model.to(torch.bfloat16)
        with torch.no_grad(), torch.autocast("cuda"):
            print(model(batch))
        with torch.no_grad():
            with torch.autocast("cuda"):
                for p, q in zip(ema.parameters(), model.parameters()):
                    p.mul_(0.99).add_(q, alpha=0.01)
        with torch.no_grad():
            with torch.autocast("cuda"):
                self.cached = teacher(batch)
        with torch.no_grad():
            with torch.autocast("cuda"):
                target = teacher(batch)
        loss = (model(batch) - target).square().mean()
        loss.backward()
        optimizer.step()
    """
    found = sorted((f.location.line, f.severity.value) for f in findings(code, "train.py") if f.rule_id == "AMP107")
    assert found == [(5, "info"), (8, "warning"), (12, "warning"), (15, "warning")]
    note = next(f for f in findings(code, "train.py") if f.rule_id == "AMP107" and f.location.line == 5)
    assert "`torch.no_grad()` block (line 5) whose results training does not use" in note.message


def test_a_no_grad_block_read_on_the_next_turn_of_its_loop_is_training():
    # The targets made under no_grad at the end of one iteration are read by the loss of the next one.
    code = """
    import torch

    def train(model, teacher, loader, optimizer):
        prev = None
        for batch in loader:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(batch, prev).mean()
            loss.backward()
            optimizer.step()
            with torch.no_grad():
                with torch.autocast("cuda"):
                    prev = teacher(batch)
            with torch.no_grad():
                with torch.autocast("cuda"):
                    preview = model(batch)
                print(preview)
            preview = None
    """
    found = sorted((f.location.line, f.severity.value) for f in findings(code, "train.py") if f.rule_id == "AMP107")
    assert found == [(11, "warning"), (14, "info")]


def test_a_transformers_modular_source_is_never_imported_so_its_findings_are_notes():
    # transformers generates modeling_<model>.py from modular_<model>.py; only the generated module runs.
    modular = "from transformers.models.llama.modeling_llama import (\n    LlamaModel,\n)\n" + textwrap.dedent(ROPE_CACHE)
    found = one(modular, "models/my_llama/modular_my_llama.py", "AMP002")
    assert found.severity.value == "info"
    assert "generator source code: modular_my_llama.py is a transformers modular source: modeling_my_llama.py" in found.message
    assert one(modular, "models/my_llama/modeling_my_llama.py", "AMP002").severity.value == "warning"
    # A module merely named modular_ (a diffusers modular pipeline, an optimizer) runs like any other.
    assert one(ROPE_CACHE, "pipelines/modular_pipeline.py", "AMP002").severity.value == "warning"
    relative = "from ..llama.modeling_llama import LlamaModel\n" + textwrap.dedent(ROPE_CACHE)
    assert file_kind("models/x/modular_x.py", relative).kind is CodeKind.GENERATOR_SOURCE


def test_kind_is_read_below_the_folder_linted(tmp_path):
    # A checkout that happens to live under a folder called tests/ is not all test code.
    project = tmp_path / "tests" / "project"
    project.mkdir(parents=True)
    (project / "train.py").write_text(textwrap.dedent(SCALER))
    report = lint_paths([project], LintSettings(jobs=1))
    assert [f.severity.value for f in report.findings if f.rule_id == "AMP004"] == ["error"]
    (project / "tests").mkdir()
    (project / "tests" / "test_train.py").write_text(textwrap.dedent(SCALER))
    report = lint_paths([project], LintSettings(jobs=1))
    by_file = {Path(f.location.file).name: f.severity.value for f in report.findings if f.rule_id == "AMP004"}
    assert by_file == {"train.py": "error", "test_train.py": "info"}


def test_a_cos_sin_table_is_called_rope_only_where_the_file_shows_rotary_embeddings():
    plain = one(ROPE_CACHE.replace("Rotary", "Table"), "model.py", "AMP002")
    assert plain.message.startswith("cos/sin table") and "RoPE" not in plain.message
    assert one(ROPE_CACHE, "model.py", "AMP002").message.startswith("RoPE table")


def test_main_block_spans_the_module_level_guard_only():
    from ampdoctor.lint.python.kind import main_block

    text = textwrap.dedent('''\
        import torch

        def helper():
            if __name__ == "__main__":
                pass

        if __name__ == '__main__':
            x = 1
        # a comment in column 0 does not end it

            y = 2
        print("after")
        ''')
    assert main_block(text) == (7, 11)
    assert main_block("import torch\n") is None
    assert main_block("if __name__ == \"__main__\":\n    run()\n") == (1, 2)


def test_main_block_is_read_from_the_code_not_from_column_zero_text():
    from ampdoctor.lint.python.kind import main_block

    # A usage example in the docstring is no block; a string continued in column 0 does not end the real one.
    text = textwrap.dedent('''\
        """Usage:

        if __name__ == "__main__":
            main()
        """
        import torch

        if "__main__" == __name__:
            parser = make_parser(description="""Train.
        Runs the loop below.""")
            loss = step(torch.zeros(3, dtype=torch.float16))
        else:
            register()
        ''')
    assert main_block(text) == (8, 11)


def test_a_script_named_for_training_is_no_helper_module():
    from ampdoctor.lint.python.kind import named_training_script

    assert named_training_script("scripts/train.py")
    assert named_training_script("finetune_lora.py")
    assert named_training_script("sdxl_train_network.py")
    assert named_training_script("scripts/train-lora.py")
    assert not named_training_script("scripts/train-utils.py")
    assert not named_training_script("library/train_util.py")  # a helper named after training is a library
    assert not named_training_script("training_args.py")
    assert not named_training_script("data/train_dataset.py")
    assert not named_training_script("sft_data.py")
    assert not named_training_script("models/unet.py")
    assert not named_training_script("trainer.py")  # the word is not `train`: a trainer class's module
