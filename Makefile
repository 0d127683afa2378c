# strategist: two commands on a fresh machine.
#   make demo   set up .venv (with MindFormers) and run the main job on a bundled example
#   make test   set up .venv and run the test suite
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
# pip keeps downloaded wheels (MindSpore's is ~800 MB) in its cache; keep that cache between runs.
export PIP_CACHE_DIR ?= $(HOME)/.cache/pip

.PHONY: demo test test-fast bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade --quiet pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

$(VENV)/.mindformers: $(VENV)/.installed
	$(PY) -m pip install --quiet -e '.[test,mindformers]'
	touch $@

demo: $(VENV)/.mindformers
	$(VENV)/bin/strategist advise examples/llama.py:llama2_70b --kwargs layers=2 batch=8 --mesh dp=8,tp=8

test: $(VENV)/.installed
	$(PY) -m pytest -q

test-fast: $(VENV)/.installed
	$(PY) -m pytest -q -m "not slow"

bench: $(VENV)/.installed
	$(PY) bench/extract.py

clean:
	rm -rf $(VENV) .pytest_cache *.egg-info
