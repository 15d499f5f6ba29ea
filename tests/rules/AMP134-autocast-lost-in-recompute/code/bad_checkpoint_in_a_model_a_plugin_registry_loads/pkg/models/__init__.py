# A registry of models: every module of this folder is imported at run time and registers its classes, so the
# trainer's `build_model` may build any of them; no module here is imported by name.
import importlib
import os

MODELS = {}


def register_model(name):
    def wrap(cls):
        MODELS[name] = cls
        return cls
    return wrap


def build_model(name, **kwargs):
    return MODELS[name](**kwargs)


for file in sorted(os.listdir(os.path.dirname(__file__))):
    if file.endswith(".py") and not file.startswith("_"):
        importlib.import_module(__name__ + "." + file[: -len(".py")])
