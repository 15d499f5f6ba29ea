# Set-up and checks. `make demo` and `make test` are the only two commands a fresh clone needs.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# CI pins the CPU build that lies on local disk; users get their normal torch.
TORCH_SPEC ?= torch

.PHONY: demo test install dev docs clean browser

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[torch]"  # torch (as TORCH_SPEC installed it) and NumPy, which torch warns without
	touch $@

$(VENV)/.dev-installed: $(VENV)/.installed
	$(PY) -m pip install -q -e ".[dev]"
	touch $@

install: $(VENV)/.installed

dev: $(VENV)/.dev-installed

demo: $(VENV)/.installed
	$(PY) examples/demo.py

# The HTML report test opens every report kind in headless Chromium. As root on Debian/Ubuntu the package is
# installed here; elsewhere that one test is reported as not run, with the command that enables it (CI sets
# AMPDOCTOR_REQUIRE_BROWSER=1, under which a missing browser fails the test instead).
browser:
	@if ! command -v chromium >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing Debian's chromium for the HTML report test"; \
		DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
			|| echo "could not install chromium: the HTML report test will be reported as not run"; \
	fi

test: $(VENV)/.dev-installed browser
	$(PY) -m pytest -q

docs: $(VENV)/.installed
	$(PY) -m ampdoctor.core.docs > docs/rules.md

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
