# Set-up and checks. `make demo` and `make test` are the only two commands a fresh clone needs.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# CI pins the CPU build that lies on local disk; users get their normal torch.
TORCH_SPEC ?= torch

.PHONY: demo test install dev docs clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e .
	touch $@

$(VENV)/.dev-installed: $(VENV)/.installed
	$(PY) -m pip install -q -e ".[dev]"
	touch $@

install: $(VENV)/.installed

dev: $(VENV)/.dev-installed

demo: $(VENV)/.installed
	$(PY) examples/demo.py

test: $(VENV)/.dev-installed
	$(PY) -m pytest -q

docs: $(VENV)/.installed
	$(PY) -m ampdoctor.rules.docs > docs/rules.md

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
