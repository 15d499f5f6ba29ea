"""Static lint of Python sources for mixed-precision bugs, with the stdlib `ast` only (user code is never
imported). `lint_python_files` is what `ampdoctor lint` calls; `lint_source` lints one string."""

from ampdoctor.lint.python.runner import lint_python_files, lint_source

__all__ = ["lint_python_files", "lint_source"]
