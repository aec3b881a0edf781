# Two set-up commands that work on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test venv clean bench gallery gallery-recorded docs

# torch is pinned first, by itself: resolving the `record` extra's range alone could pick a
# multi-GB CUDA build; with 2.13.0 already installed pip keeps it. The recorder's tests need it
# (under CI a missing torch fails them).
# (setup.py builds the optional compiled core, streamsim/native/*.pyx, each module on its own:
# rebuilt when one changes; without a C compiler the install goes on in pure Python,
# docs/native.md; `make clean` removes every built module and its C file)
$(STAMP): setup.cfg pyproject.toml setup.py $(wildcard streamsim/native/*.pyx streamsim/native/*.pxd streamsim/native/*.pxi)
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) on PATH (or make PYTHON=python3)"; exit 2; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev,record]'
	touch $(STAMP)

venv: $(STAMP)

# Exit code 1 means "hazards or a deadlock found", which is what the demo shows; 2 (bad input) fails.
demo: $(STAMP)
	$(PY) -m streamsim compare models/vllm_pp.py || test $$? -eq 1
	$(PY) -m streamsim run models/vllm_pp.py --variant regressed_49274 --out out/demo || test $$? -eq 1
	@ls out/demo

test: $(STAMP)
	$(PY) -m pytest

bench: $(STAMP)
	$(PY) benchmarks/engine.py
	$(PY) benchmarks/check.py  # beside PyTorch's CSAN (a venv of its own, made on first use)
	$(PY) benchmarks/run.py
	$(PY) benchmarks/split.py  # one model run: the simulation against each stage after it
	$(PY) benchmarks/explore.py
	$(PY) benchmarks/agents.py

# The API reference, from the docstrings of what `streamsim` exports (its __all__), with pdoc: one
# command, no configuration to keep (Sphinx would need a conf.py and autodoc directives for the
# same page). pdoc comes with the `docs` extra, never with the package itself.
docs: $(STAMP)
	$(PY) -m pip install -q -e '.[docs]'
	$(PY) -m pdoc streamsim streamsim.testing -o out/api
	@echo "API reference: out/api/streamsim.html"

# docs/gallery.md: every compare table and picture of the page, from the models as they are now.
gallery: $(STAMP)
	$(PY) docs/make_gallery.py

# docs/gallery.md's section of recorded real programs: 2-rank gloo runs under `streamsim record`
# (torch, a minute or more). Not part of `gallery`, which is deterministic and checked by a test;
# a recording's manifest counts follow the run's real timing.
gallery-recorded: $(STAMP)
	$(PY) docs/make_gallery_recorded.py

clean:
	rm -rf $(VENV) out build *.egg-info streamsim/native/*.c streamsim/native/*.so \
		streamsim/native/*.html
