# `make book` (install, execute every chapter at the default preset, render the HTML book), and the two
# tiers of tests: `make test` (per change: unit tests, every chapter once at smoke with its verdicts and
# checked numbers compared with the reference, the smoke book in a browser) and `make check` (the rest:
# seeds 1 and 2, controls, thread counts, instruction sets, nbval, reach, Jupyter server, sweeps, the book
# over three seeds). `make unit`: the unit tests alone. CHAPTER=NAME: one chapter's runs and the unit tests.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
JB := $(VENV)/bin/jupyter-book
INSTALLED := $(VENV)/.installed
MATHJAX := .mathjax/mathjax/tex-mml-chtml.js
export PYTHONHASHSEED := 0
# threads per pytest worker in the tests: 1, or what OMP_NUM_THREADS says (`OMP_NUM_THREADS=2 make unit`); every
# chapter run has the thread count of its own spec (1, or 2 for the 2-thread runs of `make check`)
TEST_THREADS := $(or $(OMP_NUM_THREADS),1)
# seeds of the published book: every chapter runs for each seed (the sweep, on a local Dask
# cluster) and shows each claim's verdict across them; seed 0 is the narrative.
# `make book BOOK_SEEDS=0` builds one seed, about three times faster
BOOK_SEEDS ?= 0-2
# pytest workers: as many as the cores hold at TEST_THREADS threads each (oversubscribed
# torch processes slow each other down many times over)
TEST_WORKERS := $(shell $(PYTHON) -c "import os; print(max(1, len(os.sched_getaffinity(0)) // $(TEST_THREADS)))")
CHAPTER ?=
# the chapter runs longest first (tests/conftest.py orders them), handed to the workers one test at a time
PYTEST := env OMP_NUM_THREADS=$(TEST_THREADS) $(PY) -m pytest -n $(TEST_WORKERS) --dist load --maxschedchunk 1 \
	--durations=15 --ignore=tests/browser $(if $(CHAPTER),--chapter $(CHAPTER))
UNIT := -m "not notebook and not check"
TIMED := bash .ci/timed

.PHONY: book test check unit install clean reference benchmark lab

install: $(INSTALLED) $(MATHJAX)

$(INSTALLED): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(TIMED) "install the requirements" $(VENV)/bin/pip install -q -r requirements.txt
	$(VENV)/bin/pip install -q --no-deps -e .
	touch $@

$(MATHJAX):
	bash .ci/fetch-mathjax.sh

book: install
	$(PY) -m paperlib book --preset default --seeds $(BOOK_SEEDS)
	$(JB) build -W -n --keep-going .
	@echo "Open _build/html/index.html"

unit: install
	$(TIMED) "unit tests" $(PYTEST) -q $(UNIT) tests

test: install
	$(TIMED) "unit tests and every chapter at smoke, seed 0" $(PYTEST) -m "not check" tests
ifeq ($(CHAPTER),)
	$(TIMED) "the smoke book from those runs" sh -c '$(PY) -m paperlib book --preset smoke --threads-per-worker 1 \
		&& $(JB) build -W -n --keep-going --path-output _build/test-book .'
	# the smoke book in Debian's Chromium: console errors, maths, images, links, overflow, search,
	# downloads; screenshots of every page go to _build/screenshots/
	$(TIMED) "the smoke book in a browser" $(PY) -m pytest -q -p no:xdist tests/browser --book-html _build/test-book/_build/html
else
	@echo "CHAPTER=$(CHAPTER): the smoke book and its browser tests need every chapter, so they did not run"
endif

check: install
	$(TIMED) "seeds 1 and 2, controls, threads, instruction sets, reach, nbval, Jupyter, sweeps" $(PYTEST) -m check tests
ifeq ($(CHAPTER),)
	# the smoke book over seeds 0 to 2 (every run is in the store by now), whose across-seeds tables and claims
	# page the browser tests read too (without screenshots: make test takes them)
	$(TIMED) "the smoke book over seeds 0-2" sh -c '$(PY) -m paperlib book --preset smoke --seeds 0-2 --threads-per-worker 1 \
		&& $(JB) build -W -n --keep-going --path-output _build/test-book-seeds .'
	$(TIMED) "the smoke book over seeds 0-2 in a browser" $(PY) -m pytest -q -p no:xdist tests/browser \
		--book-html _build/test-book-seeds/_build/html --screenshots ''
endif
	# the unit tests again at 2 threads: another BLAS kernel must not change an outcome
	$(TIMED) "unit tests at 2 threads" env OMP_NUM_THREADS=2 $(PY) -m pytest -q $(UNIT) --ignore=tests/browser tests

reference: install
	$(PY) -m paperlib reference

benchmark: install
	$(PY) benchmarks/phase_batched_vs_loop.py
	$(PY) benchmarks/khatri_rao_gram.py
	$(PY) benchmarks/jacobian_topk.py
	$(PY) benchmarks/hiernet_grid_and_entk.py
	$(PY) benchmarks/mask_recursion_ntk.py
	$(PY) benchmarks/distance_stats.py
	$(PY) benchmarks/mlp_batched_vs_loop.py
	$(PY) benchmarks/sweep_vs_sequential.py

# JupyterLab and jupytext in the same .venv, .md chapters opening as notebooks (JupyterLab's
# settings overrides inside the venv, so nothing in your home folder changes)
LAB_SETTINGS := $(VENV)/share/jupyter/lab/settings/overrides.json
lab: install
	$(VENV)/bin/pip install -q jupyterlab==4.6.6
	mkdir -p $(dir $(LAB_SETTINGS))
	echo '{"@jupyterlab/docmanager-extension:plugin": {"defaultViewers": {"markdown": "Jupytext Notebook", "myst": "Jupytext Notebook"}}}' > $(LAB_SETTINGS)
	$(VENV)/bin/jupyter lab notebooks

clean:
	rm -rf _build book/chapters book/generated runs
