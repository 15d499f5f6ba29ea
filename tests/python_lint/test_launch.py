"""Shell launchers as precision evidence: the command lines that start a Python script, the flags they pass, the
script they name; what a literal half flag makes of the script's run and of the modules it imports; a malformed
launcher is skipped, never an error."""

import ast
import textwrap
from pathlib import Path

import pytest
from test_project_model import ROPE, write  # the rotary module the project-model tests judge, and their tree writer

from ampdoctor.lint import LintSettings, lint_paths
from ampdoctor.lint.launch import launched_scripts, launches_in, option_values
from ampdoctor.lint.python.context import Context
from ampdoctor.lint.python.project import Evidence, ProjectContext, ProjectModel, Summary, module_name
from ampdoctor.lint.python.source import SourceFile

ACCELERATE_TRAIN = """
from accelerate import Accelerator
from pkg.rope import RotaryEmbedding

def main(loader):
    accelerator = Accelerator()
    rope = accelerator.prepare(RotaryEmbedding(64))
    optimizer = None
    for pos in loader:
        cos, sin = rope(pos)
        accelerator.backward((cos + sin).mean())
        optimizer.step()
"""


def amp101(root: Path) -> list[tuple[str, str]]:
    report = lint_paths([root], LintSettings(select=frozenset({"AMP101"}), jobs=1))
    return [(Path(f.location.file).name, f.message) for f in report.findings]


def test_commands_continued_over_lines_with_their_launchers_and_flags():
    text = textwrap.dedent("""\
        #!/bin/bash
        PREC=bf16
        export ROOT=/workspace/repo
        CUDA_VISIBLE_DEVICES=0,1 accelerate launch --mixed_precision bf16 --num_processes 2 \\
            scripts/train.py --bf16 True --deepspeed configs/ds.json  # a comment
        torchrun --nproc_per_node=8 -m pkg.train --precision=$PREC
        srun -N 2 --gres=gpu:8 python -u $ROOT/train.py --fp16 && echo done
        python -m torch.distributed.launch --nproc_per_node 2 finetune.py --bf16 --output_dir out
        echo "python not_a_launch.py --bf16"
        """)
    found = launches_in(text, "run.sh")
    assert [(launch.script, launch.module, launch.line) for launch in found] == [
        ("scripts/train.py", False, 4), ("pkg.train", True, 6), ("/workspace/repo/train.py", False, 7), ("finetune.py", False, 8)]
    accelerate = found[0]
    assert [(f.name, f.value, f.literal) for f in accelerate.launcher_flags] == [("mixed_precision", "bf16", True), ("num_processes", "2", True)]
    # the flags sit on the line they are written on, below the command's start
    assert [(f.name, f.value, f.line) for f in accelerate.script_flags] == [("bf16", True, 5), ("deepspeed", "configs/ds.json", 5)]
    # a value read from a shell variable is known (the launcher sets it) but not literal: the environment may change it
    assert [(f.name, f.value, f.literal) for f in found[1].script_flags] == [("precision", "bf16", False)]
    assert [(f.name, f.value) for f in found[3].script_flags] == [("bf16", True), ("output_dir", "out")]


def test_a_boolean_flag_takes_a_truth_word_or_a_variable_and_nothing_else():
    flags = launches_in("python train.py --bf16 $USE_BF16 --fp16 False --bf16_full_eval data.txt\n", "run.sh")[0].script_flags
    assert [(f.name, f.value, f.literal) for f in flags] == [("bf16", "$USE_BF16", False), ("fp16", False, True), ("bf16_full_eval", "data.txt", True)]


def test_a_command_opened_by_a_shell_keyword_is_a_launch_and_a_comment_continues_no_line():
    text = textwrap.dedent("""\
        if [ "$NODES" -gt 1 ]; then torchrun --nnodes 2 train.py --bf16; else python train.py --fp16; fi
        for seed in 1 2; do accelerate launch finetune.py --seed $seed; done
        # python old.py \\
        python new.py --bf16 True
        """)
    found = launches_in(text, "run.sh")
    assert [(launch.script, launch.line, [(f.name, f.value) for f in launch.script_flags]) for launch in found] == [
        ("train.py", 1, [("bf16", True)]), ("train.py", 1, [("fp16", True)]), ("finetune.py", 2, [("seed", "$seed")]),
        ("new.py", 4, [("bf16", True)])]


@pytest.mark.parametrize("text", ['python train.py --bf16 "unterminated\n', "\x00\xff python\n", "accelerate launch\n", "python -m\n",
                                  "python $(dirname $0)/\n", "torchrun --nnodes 2\n", "\\\n", "exec\n", "python -c 'print(1)'\n"])
def test_a_malformed_or_incomplete_launcher_is_skipped(text):
    assert launches_in(text, "run.sh") == []


def test_the_script_is_found_from_the_launcher_folder_up_to_the_project_root_and_by_its_tail(tmp_path):
    root = write(tmp_path, {"train.py": "", "pkg/train.py": "", "pkg/__init__.py": "", "tools/other.py": "",
                            "scripts/a.sh": "python train.py --bf16\n", "scripts/b.sh": "python -m pkg.train --bf16\n",
                            "scripts/c.sh": "python /workspace/repo/tools/other.py --bf16\npython missing.py --bf16\n"})
    python = sorted(root.rglob("*.py"))
    found = launched_scripts(sorted(root.rglob("*.sh")), python, [root])
    assert {Path(p).relative_to(root).as_posix(): [Path(launch.file).name for launch in launches] for p, launches in found.items()} == {
        "train.py": ["a.sh"], "pkg/train.py": ["b.sh"], "tools/other.py": ["c.sh"]}


def test_a_literal_half_flag_of_the_launcher_runs_the_scripts_model_under_autocast(tmp_path):
    root = write(tmp_path, {"train.py": ACCELERATE_TRAIN, "pkg/__init__.py": "", "pkg/rope.py": ROPE,
                            "launch.sh": "accelerate launch --mixed_precision bf16 --num_processes 8 train.py\n"})
    [(name, message)] = amp101(root)
    assert name == "rope.py" and "`--mixed_precision bf16` on a launch line) (launch.sh:1, imported at train.py:3)" in message
    (root / "launch.sh").write_text("accelerate launch --mixed_precision $MP train.py\n")  # may be anything: no evidence
    assert amp101(root) == []
    (root / "launch.sh").write_text("accelerate launch --mixed_precision no train.py\n")
    assert amp101(root) == []


def test_a_flag_the_script_declares_is_the_scripts_to_interpret(tmp_path):
    # `--bf16` is the script's own option, used for a model cast and not for autocast: the launcher makes no autocast
    train = """
    import argparse
    import torch
    from pkg.rope import RotaryEmbedding

    def main(loader):
        parser = argparse.ArgumentParser()
        parser.add_argument("--bf16", action="store_true")
        args = parser.parse_args()
        rope = RotaryEmbedding(64)
        if args.bf16:
            rope = rope.to(torch.bfloat16)
        for pos in loader:
            cos, sin = rope(pos)
            (cos + sin).mean().backward()
    """
    root = write(tmp_path, {"train.py": train, "pkg/__init__.py": "", "pkg/rope.py": ROPE, "run.sh": "python train.py --bf16\n"})
    assert amp101(root) == []


def test_a_literal_value_makes_the_scripts_half_precision_certain_and_a_variable_only_possible():
    code = textwrap.dedent("""
    import argparse
    from transformers import TrainingArguments
    parser = argparse.ArgumentParser()
    parser.add_argument("--bf16", action="store_true")
    args = parser.parse_args()
    TrainingArguments(output_dir="out", bf16=args.bf16)
    """)
    src = SourceFile.parse("train.py", code)

    def facts(script: str):
        launches = launches_in(script, "run.sh")
        return Context(src, ProjectContext(launch=option_values(launches))).facts

    alone = Context(src).facts
    assert alone.mixed_precision and not alone.mixed_precision_on  # the command line may ask for bf16
    assert facts("python train.py --bf16\n").mixed_precision_on  # this launcher's run does
    assert not facts("python train.py --bf16 $USE_BF16\n").mixed_precision_on
    assert not facts("python train.py\n").mixed_precision_on
    assert all(isinstance(n, ast.Call) for n in facts("python train.py --bf16\n").mixed_precision_on)


@pytest.mark.parametrize("line", ["deepspeed --num_gpus 8 train.py --deepspeed configs/ds_config.json",
                                  "composer train.py configs/ds_config.json --seed 1",
                                  "python train.py --deepspeed=configs/ds_config.json",
                                  "accelerate launch --config_file configs/ds_config.json train.py"])
def test_a_config_a_launch_line_passes_is_a_config_the_script_names(line):
    texts = {"train.py": "from pkg.model import GPT\nmodel = GPT()\n", "pkg/model.py": "class GPT: ...\n", "pkg/__init__.py": ""}
    bf16 = Evidence("bf16 training config (deepspeed)", frozenset({"bf16"}), "configs/ds_config.json", 3)

    def model(launches: dict) -> ProjectModel:
        return ProjectModel({rel: Summary(rel, module_name(rel), ()) for rel in texts}, [bf16], text_of=texts.get, launches=launches)

    launch = launches_in(line + "\n", "scripts/run.sh")
    half = model({"train.py": launch}).contexts()["pkg/model.py"].half
    assert half is not None and half.describe() == (
        "bf16 training config (deepspeed) (configs/ds_config.json:3, named at scripts/run.sh:1, then imported at train.py:1)")
    assert model({}).contexts().get("pkg/model.py") is None


HF_TRAIN = """
from transformers import HfArgumentParser, Trainer, TrainingArguments
from pkg.rope import RotaryEmbedding

def main():
    (args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses()
    Trainer(model=RotaryEmbedding(64), args=args).train()
"""


def test_a_half_flag_autocasts_only_where_a_framework_that_autocasts_parses_it_and_deepspeed_does_not_run(tmp_path):
    root = write(tmp_path, {"train.py": HF_TRAIN, "pkg/__init__.py": "", "pkg/rope.py": ROPE, "run.sh": "torchrun train.py --bf16 True\n"})
    assert [name for name, _ in amp101(root)] == ["rope.py"]
    # HF's `--deepspeed`: the Trainer leaves bf16 to DeepSpeed's engine, which casts the model; nothing autocasts
    (root / "run.sh").write_text("torchrun train.py --bf16 True --deepspeed ds_z3.json\n")
    assert amp101(root) == []
    # a parser of another framework (Megatron's, fairseq's `--bf16` cast the model): the run is half, not autocast
    (root / "train.py").write_text(textwrap.dedent(HF_TRAIN).replace("HfArgumentParser(TrainingArguments)", "megatron_parser()")
                                   .replace("from transformers import HfArgumentParser, Trainer, TrainingArguments", "from megatron import Trainer, megatron_parser"))
    (root / "run.sh").write_text("torchrun train.py --bf16\n")
    assert amp101(root) == []


HF_TRAIN = """
from transformers import HfArgumentParser, Trainer, TrainingArguments
from pkg.rope import RotaryEmbedding


def main():
    (args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses()
    Trainer(model=RotaryEmbedding(64), args=args).train()
"""


@pytest.mark.parametrize("line", ["torchrun train.py --bf16 False", "torchrun train.py --bf16=false", "python train.py --fp16 0",
                                  "python train.py --bf16 $BF16", 'echo "python train.py --bf16 True"',
                                  "# python train.py --bf16 True", "python train.py --output_dir x | tee log --bf16 True",
                                  'python -c "import train" --bf16 True'])
def test_a_launch_line_that_turns_no_half_mode_on_is_no_evidence(tmp_path, line):
    """Off values, a `$VAR` (the run may choose), a command only printed or commented out, a flag given to another
    program of a pipe, and code run with -c: none says the script runs in half precision."""
    files = {"pkg/__init__.py": "", "pkg/rope.py": ROPE, "train.py": HF_TRAIN}
    assert amp101(write(tmp_path, {**files, "run.sh": f"#!/bin/bash\n{line}\n"})) == []
    # the same tree with a literal half flag on the launch line: the launcher is the evidence, at its line
    found = amp101(write(tmp_path, {"run.sh": "#!/bin/bash\npython train.py --bf16 True\n"}))
    assert [name for name, _ in found] == ["rope.py"] and "run.sh:2" in found[0][1]


def test_a_dtype_bound_under_tests_of_options_the_file_does_not_define_is_not_said_of_the_default_run(tmp_path):
    # A Trainer subclass picks the reduce dtype under `self.args.fp16` / `self.args.bf16`, options of a framework's
    # parser, not of this file: which one a run takes is not known, so the finding does not name a run.
    (tmp_path / "trainer.py").write_text(textwrap.dedent("""\
        import torch
        from torch.distributed.fsdp import MixedPrecision

        class MyTrainer:
            def policy(self):
                dtype = torch.float32
                self.master_dtype = dtype
                dtype = None
                if self.args.fp16:
                    dtype = torch.float16
                elif self.args.bf16:
                    dtype = torch.bfloat16
                return MixedPrecision(param_dtype=dtype, reduce_dtype=dtype)
        """))
    report = lint_paths([tmp_path], LintSettings(select=frozenset({"AMP118"}), jobs=1))
    assert [f.message.split(";")[0] for f in report.findings] == [
        "gradients are reduced in bfloat16 or float16 where the run chooses it (else float32)"]


def test_the_innermost_root_is_the_one_path_is_relative_to_names():
    from ampdoctor.lint.launch import innermost_root

    cases = [("a/b/c.py", ["a", "a/b", "x", "."]), ("/abs/x.py", [".", "/abs", "/ab"]), ("a/b.py", [".", ""]),
             ("/abs/x.py", ["."]), ("ab/c.py", ["a"]), ("a", ["a"]), ("a/b/c", ["a/b/c/d"])]
    for path, roots in cases:
        folders = [Path(r) for r in roots]
        expected = max((r for r in folders if Path(path).is_relative_to(r)), key=lambda r: len(r.parts), default=None)
        assert innermost_root(Path(path), folders) == expected, (path, roots)
