# Two commands matter: `make book` and `make test`. Each sets up .venv when it is missing.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
CHROMIUM ?= /usr/bin/chromium
# Fingerprint of the package: when it changes, cached notebook outputs are stale.
LABFORMER_HASH = $(shell find labformer -type f -not -path '*/__pycache__/*' | LC_ALL=C sort \
                   | xargs sha256sum | sha256sum | cut -c1-16)

.PHONY: help venv book test lab bench browser clean

help:
	@echo "make book   build the HTML book into _build/html"
	@echo "make test   unit tests, every notebook (nbval), the built book in a browser"
	@echo "make lab    open the chapters in JupyterLab"
	@echo "make bench  benchmarks against PyTorch's own modules (writes bench/results.md)"

$(STAMP): requirements.txt pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "Installing the pinned requirements into $(VENV) ..."
	@set -o pipefail; $(PY) -m pip install --quiet --disable-pip-version-check \
	  -r requirements.txt 2>&1 | { grep -v "is ignored: it is neither" || true; }
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps -e .
	@touch $(STAMP)

venv: $(STAMP)

book: venv
	@mkdir -p _build
	@if [ "$$(cat _build/.labformer-hash 2>/dev/null)" != "$(LABFORMER_HASH)" ]; then \
	  echo "labformer changed since the last build: re-executing every notebook"; \
	  rm -rf _build/.jupyter_cache; fi
	$(VENV)/bin/jupyter-book build . -W -n --keep-going
	@echo "$(LABFORMER_HASH)" > _build/.labformer-hash
	@echo "Open $(CURDIR)/_build/html/index.html in a browser."

# Debian's Chromium drives the browser test (tests/test_book_html.py), with a CJK font so the
# glossary's Chinese terms render in the screenshots. Installs what is missing (root or sudo).
CJK_FONT := /usr/share/fonts/truetype/wqy/wqy-microhei.ttc
browser:
	@if [ ! -x $(CHROMIUM) ] || [ ! -e $(CJK_FONT) ]; then \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq \
	    chromium fonts-wqy-microhei >/dev/null; fi
	@test -x $(CHROMIUM) || { echo "chromium not found at $(CHROMIUM)"; exit 1; }

# Unit tests (with coverage) and the built book's tests first; then every notebook under nbval,
# two at a time: the chapters' models are small and run on one thread each.
test: venv browser book
	CHROMIUM=$(CHROMIUM) $(PY) -m pytest tests
	OMP_NUM_THREADS=1 $(PY) -m pytest book --no-cov -n 2 --dist loadfile

lab: venv
	$(VENV)/bin/jupyter lab book/

bench: venv
	$(PY) -m bench

clean:
	rm -rf _build .pytest_cache .coverage
