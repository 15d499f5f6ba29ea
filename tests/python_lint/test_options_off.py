"""Severity by evidence (`lint.python.options`): a finding whose code runs only with an option that defaults off and
that nothing in its project turns on is a note that says so; anything that may turn it on keeps the warning."""

import textwrap
from pathlib import Path

from ampdoctor.core.model import Severity
from ampdoctor.lint.engine import lint_paths
from ampdoctor.lint.python import lint_source
from ampdoctor.lint.settings import LintSettings

NN = """
import torch


def checkpoint(func, inputs, params, flag):
    if flag:
        return CheckpointFunction.apply(func, len(inputs), *inputs, *params)
    return func(*inputs)


class CheckpointFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, run_function, length, *args):
        ctx.run_function = run_function
        ctx.inputs = list(args[:length])
        with torch.no_grad():
            return run_function(*ctx.inputs)

    @staticmethod
    def backward(ctx, *grads):
        inputs = [x.detach().requires_grad_(True) for x in ctx.inputs]
        with torch.enable_grad():
            outputs = ctx.run_function(*inputs)
        return (None, None, *torch.autograd.grad(outputs, inputs, grads))
"""

UNET = """
import torch

from .nn import checkpoint


class ResBlock(torch.nn.Module):
    '''A block.

    :param use_checkpoint: if True, use gradient checkpointing.
    '''

    def __init__(self, width, use_checkpoint=False):
        super().__init__()
        self.lin = torch.nn.Linear(width, width)
        self.use_checkpoint = use_checkpoint

    def forward(self, x):
        return checkpoint(self._forward, (x,), self.parameters(), {flag})

    def _forward(self, x):
        return x + self.lin(x)
"""

TRAIN = """
import torch

from {pkg}.unet import ResBlock

model = ResBlock(64{extra})
opt = torch.optim.AdamW(model.parameters())
for _ in range(10):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(torch.randn(8, 64)).float().mean()
    loss.backward()
    opt.step()
"""


def _project(tmp_path: Path, files: dict[str, str]) -> dict[str, list]:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    report = lint_paths([tmp_path], LintSettings(jobs=1))
    out: dict[str, list] = {}
    for f in report.findings:
        if f.rule_id == "AMP134":
            out.setdefault(Path(f.location.file).relative_to(tmp_path).as_posix(), []).append(f)
    return out


def test_a_copy_that_keeps_the_option_off_is_a_note_and_one_that_turns_it_on_keeps_its_warning(tmp_path):
    """Two copies of the same UNet code in one project, each importing its own sibling `nn` (the helper and the
    Function have the same names in both): the one whose blocks pass their off-by-default option is a note naming
    it; the other passes True to the helper, and its own Function's finding stays a warning."""
    found = _project(tmp_path, {
        "a/__init__.py": "", "a/nn.py": NN, "a/unet.py": UNET.format(flag="self.use_checkpoint"),
        "b/__init__.py": "", "b/nn.py": NN, "b/unet.py": UNET.format(flag="True"),
        "train_a.py": TRAIN.format(pkg="a", extra=""), "train_b.py": TRAIN.format(pkg="b", extra=""),
    })
    (a,), (b,) = found["a/nn.py"], found["b/nn.py"]
    assert a.severity is Severity.INFO and a.details["option_off"] == ["use_checkpoint"]
    assert "runs only with `use_checkpoint=True`, which defaults to False (a/unet.py:" in a.message
    assert "nothing in this project sets" in a.message
    assert b.severity is Severity.WARNING and "option_off" not in b.details


def test_a_dict_key_naming_the_option_may_turn_it_on_a_docstring_does_not(tmp_path):
    files = {"a/__init__.py": "", "a/nn.py": NN, "a/unet.py": UNET.format(flag="self.use_checkpoint"),
             "train_a.py": TRAIN.format(pkg="a", extra="")}
    assert [f.severity for f in _project(tmp_path / "off", files)["a/nn.py"]] == [Severity.INFO]
    files["train_a.py"] = TRAIN.format(pkg="a", extra=', **{"use_checkpoint": True}')
    assert [f.severity for f in _project(tmp_path / "on", files)["a/nn.py"]] == [Severity.WARNING]


def test_a_file_linted_alone_keeps_its_warning():
    """Alone, nothing is known of the callers that may turn the option on."""
    text = textwrap.dedent(NN) + textwrap.dedent(UNET.format(flag="self.use_checkpoint")).replace("from .nn import checkpoint", "")
    found, error = lint_source(text, "unet.py")
    assert error is None
    assert [f.severity for f in found if f.rule_id == "AMP134"] == [Severity.WARNING]


def test_a_field_of_a_config_class_named_like_the_option_may_turn_it_on(tmp_path):
    """``use_checkpoint: bool = False`` in a dataclass is a field its argument parser or config sets."""
    files = {"a/__init__.py": "", "a/nn.py": NN, "a/unet.py": UNET.format(flag="self.use_checkpoint"),
             "train_a.py": TRAIN.format(pkg="a", extra=""),
             "args.py": "from dataclasses import dataclass\n\n\n@dataclass\nclass Args:\n    use_checkpoint: bool = False\n"}
    assert [f.severity for f in _project(tmp_path, files)["a/nn.py"]] == [Severity.WARNING]


def test_an_argparse_definition_of_the_option_turns_it_on_only_where_its_default_is_on(tmp_path):
    """Another script's ``add_argument("--use_checkpoint", action="store_true")`` names the option, off by default,
    without turning it on (a note); one that defaults it on may turn it on (the warning stays)."""
    files = {"a/__init__.py": "", "a/nn.py": NN, "a/unet.py": UNET.format(flag="self.use_checkpoint"),
             "train_a.py": TRAIN.format(pkg="a", extra="")}
    opts = 'import argparse\n\nparser = argparse.ArgumentParser()\nparser.add_argument("--use_checkpoint", {how}, help="use_checkpoint")\n'
    files["opts.py"] = opts.format(how='action="store_true"')
    assert [f.severity for f in _project(tmp_path / "off", files)["a/nn.py"]] == [Severity.INFO]
    files["opts.py"] = opts.format(how="default=True")
    assert [f.severity for f in _project(tmp_path / "on", files)["a/nn.py"]] == [Severity.WARNING]


def _unused(tmp_path: Path, files: dict[str, str], packaged: bool = False, module: str = "model.py") -> frozenset[str]:
    from ampdoctor.lint.python.options import ProjectOptions

    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(textwrap.dedent(text))
    paths = sorted(str(p) for p in tmp_path.rglob("*.py"))
    options = ProjectOptions(paths, rel=lambda p: Path(p).relative_to(tmp_path).as_posix(), packaged=packaged)
    return options._unused_definitions(options.parsed(str(tmp_path / module)))


MODEL = """
import registry


class Used:
    pass


class Helper:
    pass


class Dead(Used):
    def build(self):
        return Helper(), Dead()


def _kernel():
    return Helper()


@registry.register
class Registered:
    pass


class Kept(Used, metaclass=registry.Meta):
    pass


__all__ = ["Exported"]


class Exported:
    pass
"""


def test_definitions_nothing_builds_are_those_named_only_by_themselves_or_by_other_such(tmp_path):
    train = "from model import Used\n\nif __name__ == '__main__':\n    Used()\n"
    # Helper is named only by Dead and _kernel, which nothing names: dead as well; a decorated class, one with a
    # metaclass, one a string names are not
    assert _unused(tmp_path, {"model.py": MODEL, "train.py": train}) == {"Dead", "Helper", "_kernel"}


def test_nothing_is_unused_without_a_script_or_where_a_package_ships_it(tmp_path):
    # a folder of modules alone is used by code outside it
    assert _unused(tmp_path / "a", {"model.py": MODEL, "other.py": "import model\n"}) == frozenset()
    # an installable package's users build its public classes; its private functions are its own
    train = "from model import Used\n\nif __name__ == '__main__':\n    Used()\n"
    assert _unused(tmp_path / "b", {"model.py": MODEL, "train.py": train}, packaged=True) == {"_kernel"}
    # a module imported by its name as a string may have any of its classes built by name
    dynamic = "import importlib\n\nif __name__ == '__main__':\n    importlib.import_module('model').Dead()\n"
    assert _unused(tmp_path / "c", {"model.py": MODEL, "train.py": dynamic}) == frozenset()


def test_a_class_a_package_defines_in_its_init_is_used_where_a_script_imports_the_package(tmp_path):
    train = "from core import Engine\n\nif __name__ == '__main__':\n    Engine()\n"
    package = "class Engine:\n    pass\n\n\nclass Unused:\n    pass\n"
    assert _unused(tmp_path, {"core/__init__.py": package, "train/run.py": train}, module="core/__init__.py") == {"Unused"}
    # a package imported whole, its module reached by attributes
    train = "import models\n\nif __name__ == '__main__':\n    models.dit.DIT()\n"
    module = "class DIT:\n    pass\n\n\nclass Unused:\n    pass\n"
    assert _unused(tmp_path / "b", {"models/__init__.py": "from . import dit\n", "models/dit.py": module, "run.py": train},
                   module="models/dit.py") == {"Unused"}


def test_a_summary_says_whether_the_file_runs_as_a_script():
    from ampdoctor.lint.python.project import runs_as_script

    assert runs_as_script("import torch\n\nif __name__ == '__main__':\n    main()\n")
    assert runs_as_script('if "__main__" == __name__:\n    main()\n')
    # a usage example in a docstring, indented, and a string that names it are not a main block
    assert not runs_as_script('def f():\n    """\n    if __name__ == "__main__": f()\n    """\n')
    assert not runs_as_script('NAME = "__main__"\n')


def test_a_module_nothing_imports_is_judged_as_code_of_its_own(tmp_path):
    # a snippet or example beside the project's scripts: what it defines, nothing here runs, and nothing here should
    # (its reader runs it); its findings keep their severity
    script = "if __name__ == '__main__':\n    print('train')\n"
    assert _unused(tmp_path / "a", {"model.py": MODEL, "train.py": script}) == frozenset()
    # imported as a module of a package (``from . import model``), it is run, and its unused classes are named
    importer = "from . import model\n\nif __name__ == '__main__':\n    model.Used()\n"
    assert _unused(tmp_path / "b", {"pkg/__init__.py": "", "pkg/model.py": MODEL, "pkg/run.py": importer},
                   module="pkg/model.py") == {"Dead", "Helper", "_kernel"}
