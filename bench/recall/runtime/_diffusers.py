"""Entering an extracted diffusers tree (argv[1]/src) without the dependencies this environment lacks. diffusers'
package __init__ checks the installed versions of its requirements (`requests` among them) and its utils import
Pillow and `requests` for image and hub helpers that a transformer's forward never calls: the package is entered
without its __init__ (its version stood in for), the version check by a no-op, Pillow's and requests' names by
empty stand-ins. No module of diffusers itself is replaced."""

import enum
import importlib
import sys
import types
from pathlib import Path


def _module(name: str, **attrs) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    sys.modules[name] = module
    return module


def import_from_tree(root: Path, name: str) -> types.ModuleType:
    """Import diffusers' module `name` (``diffusers.models.transformers...``) from the tree at `root`."""
    _module("diffusers", __path__=[str(root / "src" / "diffusers")], __version__="0")
    _module("diffusers.dependency_versions_check", dep_version_check=lambda *args, **kwargs: None)
    _module("requests", HTTPError=type("HTTPError", (OSError,), {}))
    image = _module("PIL.Image", Image=type("Image", (), {}),
                    Resampling=enum.IntEnum("Resampling", "NEAREST BOX BILINEAR HAMMING BICUBIC LANCZOS"))
    pil = _module("PIL", __version__="10.0.0", Image=image)
    for part in ("ImageOps", "ImageFilter", "ImageDraw", "ImageFont", "PngImagePlugin"):
        setattr(pil, part, _module(f"PIL.{part}"))
    return importlib.import_module(name)
