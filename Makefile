# strategist: two commands on a fresh machine.
#   make demo   set up .venv (with MindFormers) and run the main job on a bundled example
#   make test   set up .venv and run the test suite and the strict docs build, then the live MindSpore sample and the
#               MindFormers tests again on MindSpore 2.10.0 and MindFormers 2.0.0 in .venv-ms2.10 (what CI runs)
#   make docs   regenerate docs/reference/ from the code and build the site into site/
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
# pip keeps downloaded wheels (MindSpore's is ~800 MB) in its cache; keep that cache between runs.
export PIP_CACHE_DIR ?= $(HOME)/.cache/pip
# mkdocs-material's notice about its successor is not a build warning; keep CI's log to the build's own lines
export NO_MKDOCS_2_WARNING ?= 1
# the suites run on every core, at most 4 (pytest-xdist: each live MindSpore test holds a child of a few GB), one test
# file per worker so a file's module fixtures are built once; PYTEST_JOBS= runs them in one process
PYTEST_JOBS ?= -n $(shell n=$$(nproc 2>/dev/null || echo 1); [ "$$n" -gt 4 ] && n=4; echo $$n) --dist loadfile

.PHONY: demo test test-fast test-all test-ms2.10 lint bench fixtures check-cc docs docs-check clean

# pyproject.toml admits MindSpore 2.9 and 2.10; .venv is the 2.9.0 one (MindFormers 1.9.0 pairs with it), the
# second environment below the 2.10.0 one
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade --quiet pip
	$(PY) -m pip install --quiet -e '.[test]' 'mindspore==2.9.0'
	touch $@

$(VENV)/.mindformers: $(VENV)/.installed
	$(PY) -m pip install --quiet -e '.[test,mindformers]'
	touch $@

# mindone.transformers and transformers (the mindone:<model> front end; no torch)
$(VENV)/.mindone: $(VENV)/.mindformers
	$(PY) -m pip install --quiet -e '.[test,mindformers,mindone]'
	touch $@

# Ray: strategist sweep --ray (an optional extra; tests/test_sweep.py runs a sweep on a local Ray)
$(VENV)/.ray: $(VENV)/.installed
	$(PY) -m pip install --quiet -e '.[ray]'
	touch $@

$(VENV)/.docs: $(VENV)/.installed
	$(PY) -m pip install --quiet -e '.[docs]'
	touch $@

demo: $(VENV)/.mindformers
	$(VENV)/bin/strategist advise examples/llama.py:llama2_70b --kwargs layers=2 batch=8 --mesh dp=8,tp=8 --dataset-strategy full_batch

# `strategist verify` (and the tests that run MindSpore itself) builds stub CUDA libraries with a C compiler
check-cc:
	@command -v $${CC:-cc} >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 || command -v clang >/dev/null 2>&1 || { \
	  echo "strategist verify needs a C compiler (cc/gcc/clang) and readelf: sudo apt-get install gcc" \
	       "(Debian/Ubuntu; or build-essential), sudo dnf install gcc (Fedora), or set CC"; exit 1; }
	@command -v readelf >/dev/null 2>&1 || { echo "strategist verify needs readelf: sudo apt-get install binutils"; exit 1; }

# the code's layering: ruff, and the import contracts in pyproject.toml (tests/test_layers.py checks the rest)
lint: $(VENV)/.installed
	$(VENV)/bin/ruff check strategist tests bench
	$(VENV)/bin/lint-imports

# the documentation site (MkDocs + Material), warnings and broken links as errors
docs: $(VENV)/.docs
	$(PY) docs/gen_reference.py
	$(PY) -m mkdocs build --strict

# CI's docs step: the generated reference pages must be what the code gives, and the site must build
docs-check: $(VENV)/.docs
	$(PY) docs/gen_reference.py --check
	$(PY) -m mkdocs build --strict

# CI: the lint and the docs build, every fast test plus a fixed sample of the slow ones (ci_sample; verify_live:
# MindSpore itself), then the same live sample and the MindFormers tests on MindSpore 2.10.0 and MindFormers 2.0.0
test: $(VENV)/.mindformers $(VENV)/.mindone $(VENV)/.ray check-cc lint docs-check
	$(PY) -m pytest -q $(PYTEST_JOBS) -m "not slow or ci_sample or verify_live"
	$(MAKE) --no-print-directory test-ms2.10

test-fast: $(VENV)/.installed
	$(PY) -m pytest -q $(PYTEST_JOBS) -m "not slow"

# everything, the large-model and MindFormers-heavy checks too
test-all: $(VENV)/.mindformers $(VENV)/.mindone check-cc
	$(PY) -m pytest -q $(PYTEST_JOBS)

# a second environment on MindSpore 2.10.0: strategist and its test tools, then MindFormers 2.0.0 (the one that pairs
# with MindSpore 2.10). MindFormers 2.0.0 requires hyper-parallel, which PyPI does not serve: it is installed without
# it, with its other requirements (the tests stand tests/doubles/hyper_parallel in for it). Its pyarrow>=23.0.1 needs
# NumPy 2 where it pins numpy<2.0.0: pyarrow comes from the releases that still run on NumPy 1 (<23). Its
# setuptools>=83.0.0 goes in on its own first (replacing the venv's in the same pip run as the rest once failed).
VENV210 ?= .venv-ms2.10
PY210    = $(VENV210)/bin/python
$(VENV210)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV210)
	$(PY210) -m pip install --upgrade --quiet pip
	$(PY210) -m pip install --quiet -e '.[test]' 'mindspore==2.10.0'
	touch $@

$(VENV210)/.mindformers: $(VENV210)/.installed
	$(PY210) -m pip install --quiet --no-deps 'mindformers==2.0.0'
	$(PY210) -m pip install --quiet 'setuptools>=83.0.0'
	$(PY210) -m pip install --quiet 'pyarrow>=21,<23' $$($(PY210) -c 'from importlib.metadata import requires; \
	  print(" ".join(r for r in requires("mindformers") if not r.startswith(("hyper-parallel", "mindspore", "pyarrow"))))')
	touch $@

# on MindSpore 2.10.0: the live MindSpore sample (verify_live) and the fast MindFormers tests, on MindFormers 2.0.0
# (mindformers; both_mindformers: the slow comparison with 1.9.0 that runs anyway)
test-ms2.10: $(VENV210)/.mindformers check-cc
	$(PY210) -m pytest -q $(PYTEST_JOBS) -m "((verify_live or mindformers) and not slow) or both_mindformers"

bench: $(VENV)/.installed
	$(PY) bench/extract.py

# MindSpore's own answers for tests/test_differential.py, cached in tests/fixtures/ms/ (~2-4 s per case)
fixtures: $(VENV)/.installed check-cc
	$(PY) tests/netgen.py fixtures --n $(or $(N),500)
	$(PY) tests/netgen.py fixtures --prune --n $(or $(N),500)

clean:
	rm -rf $(VENV) $(VENV210) .pytest_cache *.egg-info site
