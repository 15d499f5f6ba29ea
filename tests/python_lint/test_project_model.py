"""The project model: what a training file sets up reaches the modules it builds its model from, with provenance,
and nothing else; a file linted alone keeps its own verdict; `--project` judges named files inside their project."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from ampdoctor.lint.pins import torch_floor
from ampdoctor.lint.python.project import Evidence, ProjectModel, Summary, apply_helpers, cpu_autocast_line, imports_of, module_name

ROPE = """
import torch
from torch import nn

class RotaryEmbedding(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / 10000 ** (torch.arange(0, dim, 2).float() / dim))

    def forward(self, position_ids):
        freqs = self.inv_freq[None, :, None].float() @ position_ids[:, None, :].float()
        return freqs.cos(), freqs.sin()
"""

TRAIN = """
import torch
from pkg.rope import RotaryEmbedding
from pkg.logs import log_step

def main(loader):
    rope = RotaryEmbedding(64)
    for pos in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            cos, sin = rope(pos)
        loss = (cos + sin).mean()
        loss.backward()
        log_step(loss)
"""


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def lint(*args: str, code: int = 0) -> dict:
    proc = subprocess.run([sys.executable, "-m", "ampdoctor", "lint", "--no-config", "--format", "json", "--exit-zero", *args],
                          capture_output=True, text=True)
    assert proc.returncode == code, proc.stderr
    return json.loads(proc.stdout)


def amp101(report: dict) -> list[tuple[str, int, str]]:
    return [(Path(f["location"]["file"]).name, f["location"]["line"], f["message"]) for f in report["findings"] if f["id"] == "AMP101"]


def test_only_constructed_classes_carry_the_trainer_precision():
    imports = dict(imports_of(textwrap.dedent(TRAIN), "train", False))
    assert "pkg.rope.RotaryEmbedding" in imports
    assert not any(name.startswith("pkg.logs") for name in imports)  # a helper function is not run under autocast


def test_a_package_re_export_is_followed_to_the_defining_module():
    model = ProjectModel({
        "pkg/__init__.py": Summary("pkg/__init__.py", "pkg", (("pkg.layers.Block", 1),)),
        "pkg/layers.py": Summary("pkg/layers.py", "pkg.layers", ()),
        "train.py": Summary("train.py", "train", (("pkg.Block", 2),),
                            autocast=Evidence("bf16 autocast", frozenset({"bf16"}), "train.py", 9)),
    })
    contexts = model.contexts()
    assert set(contexts) == {"pkg/layers.py"}
    assert contexts["pkg/layers.py"].autocast.describe() == "bf16 autocast (train.py:9, imported at train.py:2)"


def test_the_trainer_autocast_reaches_the_model_file_and_is_cited(tmp_path):
    root = write(tmp_path / "proj", {"pkg/__init__.py": "", "pkg/rope.py": ROPE, "pkg/logs.py": "def log_step(x):\n    pass\n",
                                     "train.py": TRAIN})
    found = amp101(lint(str(root)))
    assert [(f, line) for f, line, _ in found] == [("rope.py", 11)]
    assert "bf16 autocast (train.py:9, imported at train.py:3)" in found[0][2]
    # the model file alone: nothing says it runs under autocast
    assert amp101(lint(str(root / "pkg" / "rope.py"))) == []
    # ... but named inside its project, it is judged under the project's precision
    assert [(f, line) for f, line, _ in amp101(lint(str(root / "pkg" / "rope.py"), "--project", str(root)))] == [("rope.py", 11)]


TRAIN_WITH_VALIDATION = """
import torch
from pkg.rope import RotaryEmbedding

def main(loader, val_pos):
    rope = RotaryEmbedding(64)
    for epoch in range(3):
        for pos in loader:
            if pos.numel():
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    cos, sin = rope(pos)
                loss = (cos + sin).mean()
                loss.backward()
        with torch.no_grad():
            with torch.autocast("cuda", dtype=torch.float16):
                rope(val_pos)
"""


def test_the_evidence_cited_is_the_autocast_training_runs_under_not_a_validation_one(tmp_path):
    # The validation autocast sits less deep in the file; the training one is what the model is trained under.
    root = write(tmp_path / "proj", {"pkg/__init__.py": "", "pkg/rope.py": ROPE, "train.py": TRAIN_WITH_VALIDATION})
    found = amp101(lint(str(root)))
    assert [(f, line) for f, line, _ in found] == [("rope.py", 11)]
    assert "bf16 autocast (train.py:10, imported at train.py:3)" in found[0][2]  # not the fp16 one at line 15


def test_each_folder_named_is_its_own_project(tmp_path):
    a = write(tmp_path / "a", {"pkg/__init__.py": "", "pkg/rope.py": ROPE})
    b = write(tmp_path / "b", {"pkg/__init__.py": "", "pkg/rope.py": "", "train.py": TRAIN})
    assert amp101(lint(str(a), str(b))) == []


def test_the_torch_floor_is_read_from_the_requirement_files(tmp_path):
    assert torch_floor(tmp_path) is None
    (tmp_path / "requirements.txt").write_text("numpy\ntorchvision>=0.9\n# torch>=1.0\ntorch >= 2.1.0\n")
    assert torch_floor(tmp_path) == ((2, 1), "requirements.txt:4")
    (tmp_path / "pyproject.toml").write_text('[project]\ndependencies = ["torch[cuda]>1.12", "x"]\n')
    assert torch_floor(tmp_path) == ((1, 13), "pyproject.toml:2")


def test_the_torch_floor_is_read_from_the_install_commands_of_the_readme(tmp_path):
    (tmp_path / "README.md").write_text("# x\n\nWorks with torch>=1.8 in principle.\n\n```bash\n"
                                        "pip install torch==2.1.2 torchvision==0.16.2\npip install -e .\n```\n")
    assert torch_floor(tmp_path) == ((2, 1), "README.md:6")  # the prose of line 3 is no install step
    (tmp_path / "README.md").write_text("conda install pytorch==1.13.1 pytorch-cuda=11.7 -c pytorch\n")
    assert torch_floor(tmp_path) == ((1, 13), "README.md:1")
    (tmp_path / "README.md").write_text("pip install -r requirements.txt\n")
    assert torch_floor(tmp_path) is None


def test_a_missing_project_folder_is_a_usage_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "ampdoctor", "lint", str(tmp_path), "--project", str(tmp_path / "nope")],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "--project" in proc.stderr and "Traceback" not in proc.stderr


def test_a_project_that_never_enters_autocast_is_known_only_as_a_folder():
    texts = {"layers.py": "class Block: ...\n", "train.py": "from layers import Block\nmodel = Block().half()\nopt.step()\n"}
    quiet = {"layers.py": Summary("layers.py", "layers", ()), "train.py": Summary("train.py", "train", (("layers.Block", 1),), loop=True)}

    def model(summaries, texts, **kwargs):
        return ProjectModel(summaries, text_of=texts.get, **kwargs)

    assert model(quiet, texts, folder=True).contexts()["layers.py"].autocast_nowhere
    assert "layers.py" not in model(quiet, texts).contexts()  # files named alone are not a project
    # one file that shows autocast (or a half training config, or a file that cannot be read) and the fact is gone
    loud = {**quiet, "eval.py": Summary("eval.py", "eval", ())}
    def nowhere(ctx):
        return ctx is not None and ctx.autocast_nowhere

    assert not nowhere(model(loud, {**texts, "eval.py": "with torch.autocast('cuda'):\n    pass\n"}, folder=True).contexts().get("layers.py"))
    assert not nowhere(model(loud, texts, folder=True).contexts().get("layers.py"))
    config = Evidence("bf16 config", frozenset({"bf16"}), "train.yaml", 3)
    assert not nowhere(model(quiet, texts, config_half=[config], folder=True).contexts().get("layers.py"))
    # no sign: a widget's `precision=0` (decimal places) and a call of the project's own trainer object
    app = {**quiet, "app.py": Summary("app.py", "app", ())}
    widgets = "seed = gr.Number(20, label='seed', precision=0)\ntrainer = make(cfg)\ntrainer(0)\n"
    assert nowhere(model(app, {**texts, "app.py": widgets}, folder=True).contexts().get("layers.py"))
    # but Lightning's `precision=16` and a framework's `Trainer(` are
    for sign in ("trainer = pl.Trainer(precision=16)\n", "trainer = Trainer(model)\n"):
        assert not nowhere(model(app, {**texts, "app.py": sign}, folder=True).contexts().get("layers.py"))


def test_a_recompute_without_autocast_is_reported_alone_and_in_a_project_that_runs_autocast(tmp_path):
    case = Path(__file__).parents[1] / "rules" / "AMP134-autocast-lost-in-recompute" / "code"
    quiet = case / "good_recompute_in_project_cast_to_half"

    def amp134(report: dict) -> list[str]:
        return [Path(f["location"]["file"]).name for f in report["findings"] if f["id"] == "AMP134"]

    assert amp134(lint(str(quiet))) == []
    assert amp134(lint(str(quiet / "layers.py"))) == ["layers.py"]  # linted alone: today's verdict
    assert amp134(lint(str(case / "bad_recompute_in_project_with_autocast"))) == ["layers.py"]


def test_a_recompute_no_run_of_its_project_is_seen_autocasting_is_a_note_and_a_warning_where_one_is(tmp_path):
    # The project trains (a framework trainer told nothing of precision): whether its runs autocast is decided at
    # launch, so the recompute that would drop autocast is a hazard said as a note, with why.
    case = Path(__file__).parents[1] / "rules" / "AMP134-autocast-lost-in-recompute" / "code"
    told_nothing = case / "good_recompute_in_project_with_a_framework_trainer_told_nothing"
    for f in told_nothing.glob("*.py"):
        (tmp_path / f.name).write_text(f.read_text())

    def amp134() -> list[tuple[str, str]]:
        return [(f["severity"], f["message"]) for f in lint(str(tmp_path))["findings"] if f["id"] == "AMP134"]

    [(severity, message)] = amp134()
    assert severity == "info" and "nothing in this project is seen running it under autocast" in message
    # a module the trainer's autocast runs imports the checkpoint: a warning, without the note
    (tmp_path / "train.py").write_text(textwrap.dedent("""
        import torch
        from layers import Block

        model = Block(64)
        opt = torch.optim.SGD(model.parameters(), lr=1e-4)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(torch.randn(8, 64)).float().mean()
        loss.backward()
        opt.step()
    """))
    [(severity, message)] = amp134()
    assert severity == "warning" and "seen running" not in message
    # an installable package that trains with its own loop, never under autocast around the Function: still a note
    # (its own runs do not exercise the recompute under autocast)
    (tmp_path / "train.py").write_text((told_nothing / "train.py").read_text())
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "blocks"\n')
    assert [severity for severity, _ in amp134()] == ["info"]
    # a library with no training loop of its own is run by its users' code, which may autocast: a warning
    (tmp_path / "train.py").unlink()
    assert [severity for severity, _ in amp134()] == ["warning"]


def test_a_framework_configured_in_code_for_mixed_precision_runs_what_its_script_builds_under_autocast(tmp_path):
    # Fabric(precision=...) is the script's autocast, in the dtype its setting names: a norm of the model it builds
    # squares in bf16 (a note) or in fp16 (a warning: the squares overflow)
    (tmp_path / "model.py").write_text(textwrap.dedent("""
        import torch

        class RMSNorm(torch.nn.Module):
            def forward(self, x):
                return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6)

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = torch.nn.Linear(8, 8)
                self.norm = RMSNorm()

            def forward(self, x):
                return self.norm(self.proj(x))  # the output of a layer autocast runs in half
    """))

    def amp123(precision: str, **extra: str) -> list[tuple[str, str]]:
        # extra: keywords written as source text
        settings = ", ".join([f"precision={precision!r}", *(f"{k}={v}" for k, v in extra.items())])
        (tmp_path / "train.py").write_text(textwrap.dedent(f"""
            import lightning as L
            import torch
            from model import Net

            fabric = L.Fabric({settings})
            model = fabric.setup(Net())
            opt = torch.optim.AdamW(model.parameters())
            loss = model(torch.randn(4, 8)).sum()
            fabric.backward(loss)
            opt.step()
        """))
        return [(f["severity"], f["message"]) for f in lint(str(tmp_path))["findings"] if f["id"] == "AMP123"]

    [(severity, message)] = amp123("16-mixed")
    assert severity == "warning" and "`L.Fabric(...)`" in message and "overflow" in message
    [(severity, message)] = amp123("bf16-mixed")
    assert severity == "info" and "0.4%" in message
    assert amp123("32-true") == []  # no mixed precision: the norm runs in fp32
    # DeepSpeed casts the weights: no autocast to spread
    assert amp123("16-mixed", strategy="'deepspeed_stage_2'") == []
    assert amp123("16-mixed", strategy="L.fabric.strategies.DeepSpeedStrategy(stage=2)") == []
    assert amp123("16-mixed", deepspeed_config="'ds.json'") == []
    # settings that do not hand the step to DeepSpeed leave it under autocast
    [(severity, _)] = amp123("16-mixed", deepspeed_config="None")
    assert severity == "warning"
    [(severity, _)] = amp123("16-mixed", loggers="L.fabric.loggers.CSVLogger('runs/deepspeed-ablation')")
    assert severity == "warning"


def test_a_folder_without_training_code_of_its_own_is_not_said_to_run_without_autocast(tmp_path):
    # a library (here, the layers alone): its runs are its users', who may well enter autocast, so the recompute that
    # loses it is still reported, as when the file is named alone
    layers = Path(__file__).parents[1] / "rules" / "AMP134-autocast-lost-in-recompute" / "code" / "good_recompute_in_project_cast_to_half" / "layers.py"
    (tmp_path / "layers.py").write_text(layers.read_text())
    (tmp_path / "utils.py").write_text("def count(model):\n    return sum(p.numel() for p in model.parameters())\n")
    assert [Path(f["location"]["file"]).name for f in lint(str(tmp_path))["findings"] if f["id"] == "AMP134"] == ["layers.py"]
    texts = {"layers.py": layers.read_text(), "utils.py": "def count(model):\n    return 0\n"}
    summaries = {p: Summary(p, p[:-3], ()) for p in texts}
    assert "layers.py" not in ProjectModel(summaries, text_of=texts.get, folder=True).contexts()


def test_a_file_that_does_not_parse_here_leaves_open_whether_the_project_runs_autocast(tmp_path):
    # a file this Python cannot parse (newer syntax, or one mid-edit) is not summarised, yet its text may enter
    # autocast: the project is not said to run without it
    case = Path(__file__).parents[1] / "rules" / "AMP134-autocast-lost-in-recompute" / "code" / "good_recompute_in_project_cast_to_half"
    for f in case.glob("*.py"):
        (tmp_path / f.name).write_text(f.read_text())
    (tmp_path / "finetune.py").write_text(textwrap.dedent("""
        import torch
        from layers import Block

        model = Block(64).cuda()
        opt = torch.optim.SGD(model.parameters(), lr=1e-4)
        for step in range(10:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(torch.randn(8, 64, device="cuda")).float().mean()
            loss.backward()
            opt.step()
    """))
    assert [Path(f["location"]["file"]).name for f in lint(str(tmp_path), code=2)["findings"] if f["id"] == "AMP134"] == ["layers.py"]


def test_autocast_signs_are_read_in_any_case():
    quiet = {"layers.py": Summary("layers.py", "layers", ()), "train.py": Summary("train.py", "train", (("layers.Block", 1),), loop=True)}
    base = {"layers.py": "class Block: ...\n", "train.py": "from layers import Block\nopt.step()\n"}
    assert ProjectModel(quiet, text_of=base.get, folder=True).contexts()["layers.py"].autocast_nowhere
    for spelling in ("cfg.SOLVER.AMP.ENABLED = True", "USE_AMP = True", "optim_wrapper = dict(type='AmpOptimWrapper')"):
        texts = {**base, "train.py": base["train.py"] + spelling + "\n"}
        assert not ProjectModel(quiet, text_of=texts.get, folder=True).contexts()["layers.py"].autocast_nowhere, spelling


def test_amp_inside_a_word_and_a_trainer_class_of_the_project_are_no_autocast_signs():
    quiet = {"layers.py": Summary("layers.py", "layers", ()), "train.py": Summary("train.py", "train", (("layers.Block", 1),), loop=True)}
    base = {"layers.py": "class Block: ...\n", "train.py": "from layers import Block\nopt.step()\n"}

    def nowhere(layers: str, train: str) -> bool:
        texts = {"layers.py": base["layers.py"] + layers, "train.py": base["train.py"] + train}
        ctx = ProjectModel(quiet, text_of=texts.get, folder=True).contexts().get("layers.py")
        return bool(ctx and ctx.autocast_nowhere)

    for quiet_text in ("x.clamp_(0)\n", "y = x.clamp(min=0, clamp=True)\n", "max_amplitude = s.amplitude\n"):
        assert nowhere(quiet_text, ""), quiet_text
    own = "class LoopTrainer(object):\n    pass\n"
    assert nowhere(own, "t = LoopTrainer()\n")
    # a trainer class the project subclasses from a framework's, or one it does not define, is a framework's loop
    assert not nowhere("class LoopTrainer(Trainer):\n    pass\n", "t = LoopTrainer()\n")
    assert not nowhere(own, "t = Trainer(model)\n")
    for spelling in ("use_amp_bf16 = True", "args.amp_dtype", "amp=True", "from torch.cuda import amp\namp.GradScaler()"):
        assert not nowhere("", spelling + "\n"), spelling


def test_cpu_autocast_reaches_only_the_files_that_read_cudas_state_with_no_device():
    # OLMo's tests enter autocast on the CPU through a conditional device type spread over lines
    test = 'with torch.autocast(\n    device_type="cuda" if cuda else "cpu", dtype=torch.bfloat16\n):\n    pass\n'
    assert cpu_autocast_line(test) == 1
    assert cpu_autocast_line("with torch.cpu.amp.autocast():\n    pass\n") == 1
    # "cpu" elsewhere, or given to a state query rather than to autocast, is not autocast entered on the CPU
    assert cpu_autocast_line('with torch.autocast("cuda"):\n    x = y.to("cpu")\n') is None
    assert cpu_autocast_line('torch.is_autocast_enabled("cpu")\n') is None
    # nor a call that keeps CPU autocast off: turned off, or enabled only where the device is not the CPU
    assert cpu_autocast_line('with torch.autocast("cpu", enabled=False):\n    pass\n') is None
    assert cpu_autocast_line('with torch.autocast(d.type, enabled=d.type != "cpu"):\n    pass\n') is None
    assert cpu_autocast_line('torch.autocast(d, enabled=d not in ("mps", "cpu"))\n') is None
    # a "cpu" passed after nested calls is still passed
    assert cpu_autocast_line('x = 1\ntorch.autocast("cpu", dtype=getattr(torch, cfg.get("dtype")))\n') == 2
    summaries = {"model.py": Summary("model.py", "model", (), autocast_state=True),
                 "layers.py": Summary("layers.py", "layers", ()),
                 "tests/amp.py": Summary("tests/amp.py", "tests.amp", (), cpu_autocast=7)}
    contexts = ProjectModel(summaries).contexts()
    assert contexts["model.py"].cpu_autocast == Evidence("autocast entered on the CPU", frozenset(), "tests/amp.py", 7)
    assert "layers.py" not in contexts
    del summaries["tests/amp.py"]
    assert "model.py" not in ProjectModel(summaries).contexts()


HELPERS = '''\
import torch


class Recompute(torch.autograd.Function):
    pass


def checkpoint(func, inputs, flag):
    """Recompute in backward (gradient checkpointing)."""
    return Recompute.apply(func, *inputs) if flag else func(*inputs)


@torch.no_grad()
def registered(x):
    return Recompute.apply(x)


def long_signature(
    x,
):
    return Recompute.apply(x)


def plain(x):
    return x
'''


def test_the_module_level_functions_that_apply_a_function_are_read_from_the_text():
    # a decorated one is handed to something that calls it; a signature closed in the first column is not a body end
    assert apply_helpers(HELPERS) == ("checkpoint", "long_signature")
    assert apply_helpers("def f(x):\n    return x.apply(g)\n") == ()  # no autograd Function in the file


def test_a_helper_is_unused_only_when_no_file_of_the_project_imports_it():
    util = Summary("pkg/util.py", "pkg.util", (), helpers=("checkpoint",))
    other = Summary("pkg/model.py", "pkg.model", ())

    def unused(model_text: str, *more: str, **kwargs) -> frozenset[str]:
        texts = {"pkg/util.py": HELPERS, "pkg/model.py": model_text, **{m: "" for m in more}}
        summaries = {"pkg/util.py": util, "pkg/model.py": other, **{m: Summary(m, module_name(m), ()) for m in more}}
        model = ProjectModel(summaries, text_of=texts.get, folder=True, **kwargs)
        return model.contexts()["pkg/util.py"].unused_helpers if "pkg/util.py" in model.contexts() else frozenset()

    # torch's own checkpoint, and a comment, are not this helper
    assert unused("from torch.utils.checkpoint import checkpoint\n# our checkpoint is unused\ny = checkpoint(f, x)\n") == {"checkpoint"}
    assert unused("from .util import checkpoint as ckpt\ny = ckpt(f, (x,), True)\n") == frozenset()
    assert unused("from pkg.util import *\ny = checkpoint(f, (x,), True)\n") == frozenset()
    assert unused("from pkg import util\ny = util.checkpoint(f, (x,), True)\n") == frozenset()
    assert unused("import pkg.util as u\ny = u.checkpoint(f, (x,), True)\n") == frozenset()
    # a package's users may call it: a module of a regular package at the top, or below a folder of no modules (src/)
    assert unused("x = 1\n", "pkg/__init__.py", packaged=True) == frozenset()
    # ... but not in a folder of no `__init__.py`: no part of what the package installs for its users
    assert unused("x = 1\n", packaged=True) == {"checkpoint"}
    # a file that does not compile (mid-edit) and names the helper: a use, once it is fixed
    broken = ProjectModel({"pkg/util.py": util, "pkg/model.py": other}, text_of={"pkg/util.py": HELPERS, "pkg/model.py": "",
                          "scratch.py": "from pkg.util import checkpoint\ncheckpoint(f, (x,), True\n"}.get, folder=True,
                          unparsed=("scratch.py",))
    assert "pkg/util.py" not in broken.contexts()


def test_a_packaged_project_ships_its_regular_packages_not_its_folders_of_scripts():
    def unused(util: str, *more: str) -> frozenset[str]:
        summaries = {m: Summary(m, module_name(m), (), helpers=("checkpoint",) if m == util else ()) for m in (util, *more)}
        texts = {m: HELPERS if m == util else "" for m in summaries}
        contexts = ProjectModel(summaries, text_of=texts.get, folder=True, packaged=True).contexts()
        return contexts[util].unused_helpers if util in contexts else frozenset()

    assert unused("util.py") == frozenset()  # a module at the top
    assert unused("src/pkg/models/util.py", "src/pkg/__init__.py", "src/pkg/models/__init__.py") == frozenset()
    assert unused("pkg/models/util.py", "pkg/__init__.py", "pkg/models/__init__.py", "train.py") == frozenset()
    # a demo's folder: its script imports `models` as a sibling package, run from there
    assert unused("audio/models/util.py", "audio/models/__init__.py", "audio/demo.py") == {"checkpoint"}
    assert unused("audio/models/util.py", "audio/demo.py") == {"checkpoint"}


def test_a_file_is_placed_below_its_root_by_whole_parts_as_pathlib_places_it():
    # `root_of`/`below` compare parsed parts (remembered per path) instead of building a Path per question: they must
    # answer what `Path.relative_to` answers, for absolute and relative paths, "." as a root, and a root that is only
    # a prefix of a folder's name (`/ab` is not below `/a`).
    from ampdoctor.lint.python.reach import below, root_of

    def by_pathlib(path, roots):
        for root in roots:
            try:
                return root, Path(path).relative_to(root).as_posix()
            except ValueError:
                continue
        return None, None

    paths = ["/a/b/c.py", "a/b.py", "/a", "a", "./a/b.py", "/ab/c.py", "/a/./b.py", "//a/b", "/a/b/"]
    root_sets = [["/a"], ["a"], ["."], [""], ["/"], ["/a/b", "/a"], ["a/b"], ["/ab"], [Path("/a")], ["./a"]]
    for path in paths:
        for roots in root_sets:
            root, rel = by_pathlib(path, roots)
            assert root_of(path, roots) == root and root_of(Path(path), roots) == root, (path, roots)
            assert below(path, roots) == rel, (path, roots)


# a project that makes its half precision by casting the model, with a checkpoint Function in its layers
CAST_TO_HALF = Path(__file__).parents[1] / "rules" / "AMP134-autocast-lost-in-recompute" / "code" / "good_recompute_in_project_cast_to_half"

# another tool of the repository that autocasts its own model, and imports nothing of the project above
OTHER_TOOL = """
import torch

def evaluate(net, x):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        return net(x)
"""


def test_a_file_no_python_can_compile_does_not_leave_its_folder_partial(tmp_path):
    # The recompute is a note where nothing of the project runs it under autocast. A file that cannot run at all (a
    # Python 2 print, mixed tabs) is no unknown: the folder is still read as whole. One that could not be read, or in
    # syntax newer than this Python's, may still run something, and keeps the warning.
    def amp134(extra: dict[str, str]) -> list[str]:
        cast = {f.name: f.read_text() for f in CAST_TO_HALF.glob("*.py")}
        root = write(tmp_path / str(len(list(tmp_path.iterdir()))), {**cast, "tools/evaluate.py": OTHER_TOOL, **extra})
        # a file that does not parse is an input error (exit 2) either way
        return [f["severity"] for f in lint(str(root), "--select", "AMP134", code=2 if extra else 0)["findings"]]

    assert amp134({}) == ["info"]
    assert amp134({"legacy/old.py": 'print "done"\n'}) == ["info"]
    assert amp134({"legacy/old.py": "if True:\n\tx = 1\n        y = 2\n"}) == ["info"]
    # ... yet its text is read for what it will do once fixed: enter autocast (it may import the layers then)
    assert amp134({"legacy/old.py": 'import torch\nwith torch.autocast("cuda"):\n    print "x"\n'}) == ["warning"]


def test_an_unrendered_template_is_no_code_that_may_enter_autocast(tmp_path):
    # A project template (cookiecutter/copier: a `{{...}}` placeholder in a folder or file name, as a vendored
    # transformers' templates/ has) does not compile as it stands, and is never fixed in place: what runs is the file
    # rendered from it, in another project. Its text naming autocast says nothing of this project's runs; the same
    # text in a broken file of the project itself still keeps the warning.
    def amp134(extra: dict[str, str]) -> list[str]:
        cast = {f.name: f.read_text() for f in CAST_TO_HALF.glob("*.py")}
        root = write(tmp_path / str(len(list(tmp_path.iterdir()))), {**cast, **extra})
        return [f["severity"] for f in lint(str(root), "--select", "AMP134", code=2)["findings"]]

    template = 'import torch\n{% if cookiecutter.amp %}\nwith torch.autocast("cuda"):\n    step()\n{% endif %}\n'
    assert amp134({"templates/{{cookiecutter.name}}/train_{{cookiecutter.name}}.py": template}) == []
    assert amp134({"templates/project/train_amp.py": template}) == ["warning"]


def test_a_file_python_cannot_decode_does_not_leave_its_folder_partial(tmp_path):
    # Bytes that are not UTF-8, in a file with no coding line (a comment in a legacy code page): Python refuses to
    # compile it (SyntaxError, "(unicode error)"), so it runs nothing, as a syntax error does. Its text is still read
    # for the signs of what it will do once fixed.
    def amp134(extra: bytes) -> list[str]:
        cast = {f.name: f.read_text() for f in CAST_TO_HALF.glob("*.py")}
        root = write(tmp_path / str(len(list(tmp_path.iterdir()))), {**cast, "tools/evaluate.py": OTHER_TOOL})
        (root / "legacy").mkdir()
        (root / "legacy" / "old.py").write_bytes(extra)
        return [f["severity"] for f in lint(str(root), "--select", "AMP134", code=2)["findings"]]

    assert amp134(b'# \xb8\xd6\xcf\xd6\nx = 1\n') == ["info"]
    assert amp134(b'import torch\nwith torch.autocast("cuda"):  # \xb8\xd6\n    x = 1\n') == ["warning"]


def test_only_a_syntax_error_says_a_file_cannot_run():
    from ampdoctor.lint.python.reach import cannot_run
    from ampdoctor.report import ErrorKind, ReportError

    def result(kind):
        return ("a.py", [], ReportError("a.py", "x", kind=kind) if kind else None, None)

    assert cannot_run(result(ErrorKind.SYNTAX))
    assert not cannot_run(result(ErrorKind.NEWER_SYNTAX))
    assert not cannot_run(result(ErrorKind.UNREADABLE))
    assert not cannot_run(result(None))


ACCELERATE_BF16 = """\
compute_environment: LOCAL_MACHINE
distributed_type: MULTI_GPU
mixed_precision: bf16
num_processes: 8
"""

FP16_AUTOCAST_TRAIN = """
import torch

def train(model, loader, opt):
    for x, y in loader:
        with torch.autocast("cuda"):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
"""


def test_a_config_governs_the_code_of_the_nearest_folder_holding_code(tmp_path):
    # In a repository of independent benchmarks, one benchmark's bf16 config says nothing of another's fp16 autocast;
    # a folder of configs at the top, or beside the code's folders, configures all of it.
    def amp107(files: dict[str, str]) -> list[tuple[str, str]]:
        root = write(tmp_path / str(len(list(tmp_path.iterdir()))), files)
        return [(f["location"]["file"].rpartition(str(root) + "/")[2], f["severity"])
                for f in lint(str(root), "--select", "AMP107")["findings"]]

    bench = {"detection/ssd/engine.py": FP16_AUTOCAST_TRAIN, "llm_lora/scripts/train.py": "import torch\n"}
    assert amp107({**bench, "llm_lora/configs/default_config.yaml": ACCELERATE_BF16}) == []
    assert amp107({**bench, "configs/default_config.yaml": ACCELERATE_BF16}) == [("detection/ssd/engine.py", "warning")]
    assert amp107({**bench, "detection/configs/default_config.yaml": ACCELERATE_BF16}) == [("detection/ssd/engine.py", "warning")]


def test_a_package_that_imports_its_folder_at_run_time_imports_every_module_there():
    registry = textwrap.dedent("""
        import importlib, pkgutil
        for info in pkgutil.iter_modules(__path__):
            importlib.import_module(f"{__name__}.{info.name}")
    """)
    assert imports_of(registry, "pkg.models", True) == (("pkg.models.*", 4),)
    # a module named literally is an ordinary import, not a registry of the folder
    assert imports_of("import importlib, os\nos.listdir('.')\nimportlib.import_module('pkg.extra')\n", "pkg.models", True) == ()
    # only a package's own __init__ registers its folder
    assert imports_of(registry, "pkg.models.loader", False) == ()
    summaries = {p: Summary(p, module_name(p), ()) for p in ("pkg/models/__init__.py", "pkg/models/a.py",
                                                             "pkg/models/sub/__init__.py", "pkg/models/sub/b.py", "pkg/other.py")}
    model = ProjectModel(summaries, text_of=lambda p: registry if p == "pkg/models/__init__.py" else "")
    assert sorted(m for m, _ in model.imports("pkg/models/__init__.py")) == ["pkg.models.a", "pkg.models.sub"]


def test_a_function_a_package_ships_is_judged_for_its_users_autocast_only_where_it_meets_a_weight():
    """Nothing in an installable package autocasts, but its users' runs may: a Function it ships that hands its
    kernel a weight gets a note; one over activations only, or the same Function in a folder of scripts that is no
    package, gets nothing at all (not even a note)."""
    from ampdoctor.lint import LintSettings, lint_paths

    root = Path(__file__).resolve().parents[1] / "rules" / "AMP110-custom-function-without-custom-fwd" / "code"

    def amp110(case: str) -> list[tuple[str, int, str]]:
        report = lint_paths([root / case], LintSettings(jobs=1))
        return [(Path(f.location.file).name, f.location.line, f.severity.value) for f in report.findings if f.rule_id == "AMP110"]

    assert amp110("good_extension_function_a_package_ships_is_a_note_for_its_users") == [("linear.py", 11, "info")]
    assert amp110("good_package_function_of_activations_only") == []
    assert amp110("good_extension_function_in_scripts_no_package_ships") == []
