# Two commands matter: `make book` and `make test`. Each sets up .venv when it is missing.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
CHROMIUM ?= /usr/bin/chromium
# Notebooks executed at once by `make book` (each runs on one thread), and pytest workers.
JOBS ?= 2
# How many of the slowest tests `make test` lists (DURATIONS=0: all).
DURATIONS ?= 15
# Fingerprint of the package and of the sweeps the chapters read (book/data): when either
# changes, cached notebook outputs are stale.
LABFORMER_HASH = $(shell find labformer book/data -type f -not -path '*/__pycache__/*' | LC_ALL=C sort \
                   | xargs sha256sum | sha256sum | cut -c1-16)
# The executed outputs also depend on the seed, on the CPU kernels the chapters run with, and on
# whether a Chinese font is installed (plots drawn per edition need one for their Chinese twin).
BOOK_KEY = $(LABFORMER_HASH) seed=$(LABFORMER_SEED) cpu=$(ATEN_CPU_CAPABILITY) \
           zh-font=$(if $(wildcard $(CJK_FONT)),yes,no)

.PHONY: help venv book translations test unit lint test-robust test-notebooks test-mutants lab bench browser \
        clean screenshots

help:
	@echo "make book   build the HTML book into _build/html (English) and _build/html/zh (中文)"
	@echo "make test   lint, the book (every notebook executed), unit tests, the book in a browser"
	@echo "make unit   the library's tests only (tests/library), under a minute"
	@echo "make test-notebooks  every notebook under nbval, with LABFORMER_SEED / ATEN_CPU_CAPABILITY"
	@echo "make test-robust     every notebook under nbval for several seeds and CPU kernel settings"
	@echo "                     (SEEDS=N: N fresh random seeds)"
	@echo "make test-mutants    plant bugs in a copy of labformer; each chapter must catch its own"
	@echo "make lab    open the chapters in JupyterLab"
	@echo "make screenshots  the browser tests again, saving what they see in _build/screenshots/"
	@echo "make translations  update the Chinese catalogues after an English change"
	@echo "make bench  benchmarks against PyTorch's own modules (writes bench/results.md)"

# The venv is installed from requirements.lock: every package it holds, transitive ones too, at
# an exact version, with --no-deps so that pip resolves nothing of its own (tests/book/
# test_lock.py fails when the venv and the lock differ). requirements.txt is the short list a
# person edits; `make lock` installs it and writes the lock from the venv it gives.
$(STAMP): requirements.txt requirements.lock pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "Installing the locked requirements into $(VENV) ..."
	@set -o pipefail; $(PY) -m pip install --quiet --disable-pip-version-check --no-deps \
	  -r requirements.lock 2>&1 | { grep -v "is ignored: it is neither" || true; }
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps -e .
	@touch $(STAMP)

# After an edit to requirements.txt: install it (pip resolves the new versions), then write
# every package the venv holds into requirements.lock (pip freeze; labformer itself, installed
# editable, is left out). torch is written without its local label (2.13.0, not 2.13.0+cpu):
# pip takes the CPU build from the CPU index or a local wheel, as requirements.txt says. No
# hashes: pip freeze writes none, and the CPU wheel's hash differs between its sources.
.PHONY: lock
lock:
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@set -o pipefail; $(PY) -m pip install --quiet --disable-pip-version-check \
	  -r requirements.txt 2>&1 | { grep -v "is ignored: it is neither" || true; }
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps -e .
	@{ echo "# Every package of .venv at its exact version (make lock writes this file from"; \
	   echo "# requirements.txt; make installs it with pip install --no-deps -r requirements.lock)."; \
	   $(PY) -m pip freeze --all --exclude-editable --disable-pip-version-check \
	     | grep -v '^#' | sed -E 's/^(torch==[^+]*)\+cpu$$/\1/'; } > requirements.lock.tmp
	@mv requirements.lock.tmp requirements.lock
	@touch $(STAMP)
	@echo "requirements.lock: $$(grep -vc '^#' requirements.lock) packages"

# The git filter that keeps outputs out of git (.gitattributes applies it to the chapters): a
# learner who runs and saves a chapter keeps the outputs in their file, and `git status` stays
# clean. Its command is book/_ext/cell_metadata.py's STRIP. Outside a git checkout: nothing.
NBSTRIP := $(CURDIR)/$(VENV)/bin/python $(CURDIR)/book/_ext/cell_metadata.py clean
# JupyterLab starts a chapter's kernel without asking which one, and renders every cell of a
# chapter (no windowing: the prose's values are filled in everywhere, not only in view), in the
# venv's settings overrides.
LAB_OVERRIDES := $(VENV)/share/jupyter/lab/settings/overrides.json
venv: $(STAMP)
	@mkdir -p $(dir $(LAB_OVERRIDES)) && test -s $(LAB_OVERRIDES) || echo \
	  '{"@jupyterlab/notebook-extension:tracker": {"autoStartDefaultKernel": true, "windowingMode": "none"}}' \
	  > $(LAB_OVERRIDES)
	@if git rev-parse --git-dir >/dev/null 2>&1 && \
	    [ "$$(git config --get filter.nbstripout.clean)" != "$(NBSTRIP)" ]; then \
	  git config filter.nbstripout.clean "$(NBSTRIP)" && \
	  git config filter.nbstripout.smudge cat && \
	  git config diff.ipynb.textconv "$(NBSTRIP) -t" && \
	  echo "git: chapters are stored without their outputs (filter nbstripout)"; fi

# A build that fails leaves no HTML behind and fails again on the next run: Sphinx only re-reads
# changed pages, so a page whose notebook failed would otherwise be served, traceback included,
# by a second build that exits 0. jupyter-cache never stores a failed execution, so the next
# build re-executes exactly the notebooks that failed (and any notebook that changed).
# TQDM_DISABLE=1: no progress bar reaches a page, whatever a chapter's code asks for.
book: venv
	@mkdir -p _build
	@if [ "$$(cat _build/.labformer-hash 2>/dev/null)" != "$(BOOK_KEY)" ]; then \
	  echo "labformer, book/data, LABFORMER_SEED, ATEN_CPU_CAPABILITY or the Chinese font changed: re-executing every notebook"; \
	  rm -rf _build/.jupyter_cache _build/.doctrees _build/zh/_build/.doctrees; fi
	@echo "$(BOOK_KEY)" > _build/.labformer-hash
	@# The notebooks first, two at a time, into the execution cache; the build then reads it.
	@if ! TQDM_DISABLE=1 $(TIMED) "execute notebooks ($(JOBS) at once)" \
	     $(PY) book/_ext/execute_notebooks.py --jobs $(JOBS); then \
	  rm -rf _build/html _build/.doctrees; \
	  echo "make book: a notebook failed (traceback above); _build/html was removed." >&2; \
	  exit 1; fi
	@if ! TQDM_DISABLE=1 $(TIMED) "HTML, English" \
	     $(VENV)/bin/jupyter-book build . -W -n --keep-going; then \
	  rm -rf _build/html _build/.doctrees; \
	  echo "make book: the build failed (errors above); _build/html was removed." >&2; \
	  exit 1; fi
	@echo "Building the Chinese edition (book/locales/zh_CN; notebooks come from the cache) ..."
	@$(PY) book/_ext/editions.py config zh_CN >/dev/null
	@if ! TQDM_DISABLE=1 $(TIMED) "HTML, Chinese" \
	     $(VENV)/bin/jupyter-book build . --config _build/_config.zh_CN.yml \
	     --toc _build/_toc.zh_CN.yml --path-output _build/zh -W -n --keep-going; then \
	  rm -rf _build/html _build/.doctrees _build/zh; \
	  echo "make book: the Chinese edition failed (errors above); _build/html was removed." >&2; \
	  exit 1; fi
	@# A page whose source is gone (a renamed chapter) would stay in the output: remove it.
	@for page in _build/html/book/*.html _build/zh/_build/html/book/*.html; do \
	  stem=$$(basename "$$page" .html); \
	  [ -e "book/$$stem.ipynb" ] || [ -e "book/$$stem.md" ] || rm -f "$$page"; done
	@rm -rf _build/html/zh && cp -r _build/zh/_build/html _build/html/zh
	@echo "Open $(CURDIR)/_build/html/index.html in a browser (中文: _build/html/zh/index.html)."

# After a change to the English prose: extract its messages and update the Chinese catalogues
# (book/locales/zh_CN/LC_MESSAGES/book/*.po), then list what needs translating. Code cells are
# not extracted: both editions show the same code and outputs. Figure captions exist only in
# executed notebooks: the extraction reads the book's execution cache (`make book` fills it).
translations: venv
	@$(PY) book/_ext/editions.py config gettext >/dev/null
	@rm -rf _build/gettext-src
	@TQDM_DISABLE=1 $(VENV)/bin/jupyter-book build . --config _build/_config.gettext.yml \
	  --builder custom --custom-builder gettext --path-output _build/gettext-src -q 2>/dev/null
	@$(VENV)/bin/sphinx-intl update -p _build/gettext-src/_build/gettext -l zh_CN \
	  -d book/locales -w 0 | grep -v "Not Changed" || true
	@$(PY) book/_ext/translations.py || echo "make translations: translate the messages above" \
	  "(python book/_ext/translations.py export|import PAGE), then run make book."
	@if [ -d _build/html/book ]; then $(PY) book/_ext/claims.py extract; fi
	@$(PY) book/_ext/claims.py check >/dev/null || { $(PY) book/_ext/claims.py check; echo \
	  "make translations: translate the claims above (book/locales/zh_CN/claims/PAGE.json)"; }

# Debian's Chromium drives the browser test (tests/book/test_book_html.py), with a CJK font so the
# glossary's Chinese terms render in the screenshots. Installs what is missing (root or sudo).
CJK_FONT := /usr/share/fonts/truetype/wqy/wqy-microhei.ttc
browser:
	@if [ ! -x $(CHROMIUM) ] || [ ! -e $(CJK_FONT) ]; then \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq \
	    chromium fonts-wqy-microhei >/dev/null; fi
	@test -x $(CHROMIUM) || { echo "chromium not found at $(CHROMIUM)"; exit 1; }

# Lint and types; the book build, which executes every notebook once and fails on any error
# (see `book`); then every test (with coverage): the unit tests, the built book's tests in a
# browser and the ones that start processes of their own (marked `solo`: two DDP processes,
# JupyterLab), on $(JOBS) workers (one test file per worker: a file's fixtures are built once;
# the longest files first, tests/conftest.py). Each phase is timed (tests/timed.sh) and the
# table printed at the end (tests/phases.sh).
# nbval runs the notebooks under other seeds and CPU kernels: `test-notebooks`, `test-robust`.
NBVAL := $(PY) -m pytest book --nbval-lax --nbval-cell-timeout=900 -n $(JOBS) --dist loadfile
TIMED := PHASES=$(CURDIR)/_build/phases.tsv $(CURDIR)/tests/timed.sh
test:
	@mkdir -p _build && rm -f _build/phases.tsv
	@$(TIMED) "setup (.venv, browser)" $(MAKE) --no-print-directory venv browser
	@$(TIMED) "lint and types" $(MAKE) --no-print-directory lint
	@$(MAKE) --no-print-directory book
	@$(TIMED) "tests on $(JOBS) workers" env CHROMIUM=$(CHROMIUM) $(PY) -m pytest tests \
	  -n $(JOBS) --dist loadfile --cov=labformer --cov-report=term --cov-fail-under=90 \
	  --durations=$(DURATIONS)
	@tests/phases.sh _build/phases.tsv

# The browser tests take screenshots only when asked (LABFORMER_SCREENSHOTS=1): pictures for a
# person to look at (every page at 1280 px and in the dark, each diagram at 1280 and 400 px in
# both editions, the live translator, JupyterLab), which no test reads. After `make book`.
screenshots: venv browser
	rm -rf _build/screenshots
	LABFORMER_SCREENSHOTS=1 CHROMIUM=$(CHROMIUM) $(PY) -m pytest -n $(JOBS) --dist loadfile -q \
	  $$(grep -rl --include='test_*.py' 'save_shot(' tests | sort)
	@echo "Screenshots: $(CURDIR)/_build/screenshots/"

# The chapters' code lines fit the book's code boxes: 80 columns (a 1024 px screen shows 86).
# The workflow for forks and the citation file are checked against their schemas (offline).
lint: venv
	$(VENV)/bin/ruff check labformer tests bench book/_ext book/sweeps
	$(VENV)/bin/ruff check --select E501 --line-length 80 book/*.ipynb
	$(VENV)/bin/mypy
	$(VENV)/bin/check-jsonschema --builtin-schema vendor.github-workflows .github/workflows/*.yml
	$(VENV)/bin/check-jsonschema --builtin-schema vendor.citation-file-format CITATION.cff

# Every notebook under nbval for seeds 0-4 crossed with ATEN_CPU_CAPABILITY settings; prints a
# chapter x variant table. Chapters assert claims, so every seed and every CPU must pass.
# SEEDS=N: N fresh random seeds instead (printed, so a failure can be rerun).
test-robust: venv
	$(PY) tests/robust.py $(if $(SEEDS),--seeds $(SEEDS))

# Plant one bug at a time (1/sqrt(d_k), masks, KV cache, ...) in a copy of labformer and run the
# chapter that teaches that part: it must fail. Prints a bug x chapter table (tests/mutants.py).
test-mutants: venv
	$(PY) tests/mutants.py

# The library's own tests (tests/library: attention, masks, layers, decoding, data, training),
# on $(JOBS) workers: under a minute, the loop to run while changing the model.
unit: venv
	$(PY) -m pytest tests/library -n $(JOBS) -q

# Every notebook under nbval, once, with the seed and CPU kernels of the environment, e.g.
# LABFORMER_SEED=2 ATEN_CPU_CAPABILITY=avx2 make test-notebooks
test-notebooks: venv
	OMP_NUM_THREADS=1 TQDM_DISABLE=1 $(NBVAL)

# JupyterLab with the MyST renderer (jupyterlab-myst, pinned): the chapters read as on the page.
# As root, JupyterLab needs --allow-root; LAB_ARGS passes more options, for example
# make lab LAB_ARGS="--no-browser --port 8890".
LAB_ARGS ?=
# JupyterLab reads custom CSS only from its user config folder (custom/custom.css): `make lab`
# gives it one inside .venv with the book's styles for JupyterLab (book/_ext/lab/custom.css),
# and still reads your own Jupyter config (~/.jupyter, or $$JUPYTER_CONFIG_DIR) from the path.
LAB_CONFIG := $(CURDIR)/$(VENV)/etc/labformer-lab
lab: venv
	@mkdir -p $(LAB_CONFIG)/custom && cp book/_ext/lab/custom.css $(LAB_CONFIG)/custom/custom.css
	JUPYTER_CONFIG_PATH="$(CURDIR)/book/_ext/lab:$${JUPYTER_CONFIG_DIR:-$$HOME/.jupyter}$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}" \
	  JUPYTER_CONFIG_DIR=$(LAB_CONFIG) \
	  $(VENV)/bin/jupyter lab --notebook-dir=book $(if $(filter 0,$(shell id -u)),--allow-root) \
	  --custom-css $(LAB_ARGS)

# The benchmarks' Hugging Face peer (bench/lm.py: transformers.GPT2LMHeadModel) is a bench-only
# dependency: requirements-bench.lock, installed with --no-deps into a second venv, .venv-bench,
# that reads everything else (torch, numpy, labformer) from .venv through a .pth file; .venv
# itself stays exactly requirements.lock. When the install fails (no registry), the benchmarks
# run in .venv and the GPT-2 row says "not installed". HF_HUB_OFFLINE: nothing is downloaded.
BENCH_VENV := .venv-bench
BENCH_STAMP := $(BENCH_VENV)/.installed
$(BENCH_STAMP): requirements-bench.lock $(STAMP)
	@rm -rf $(BENCH_VENV) && $(PY) -m venv $(BENCH_VENV)
	@echo "Installing requirements-bench.lock (transformers) into $(BENCH_VENV) ..."
	@set -o pipefail; $(BENCH_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
	  --no-deps -r requirements-bench.lock 2>&1 | { grep -v "is ignored: it is neither" || true; }
	@purelib='import sysconfig; print(sysconfig.get_paths()["purelib"])'; \
	  echo "import site; site.addsitedir('$$($(PY) -c "$$purelib")')" \
	    > "$$($(BENCH_VENV)/bin/python -c "$$purelib")/labformer-venv.pth"
	@touch $(BENCH_STAMP)

bench: venv
	@$(MAKE) --no-print-directory $(BENCH_STAMP) || echo "make bench: requirements-bench.lock" \
	  "did not install; the Hugging Face peer will say \"not installed\"" >&2
	@if [ -f $(BENCH_STAMP) ]; then py=$(BENCH_VENV)/bin/python; else py=$(PY); fi; \
	  echo "HF_HUB_OFFLINE=1 $$py -m bench"; HF_HUB_OFFLINE=1 $$py -m bench

clean:
	rm -rf _build .pytest_cache .coverage
