# graphstrata — the README's commands. Everything installs into .venv from the package registries.
#   make demo   create/update .venv, index the sample corpus, answer example queries (CLI, LlamaIndex, LangChain)
#   make test   create/update .venv, run tests/ and integration_tests/
#   make bench  benchmarks (slow; not part of make test)

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip
CONSTRAINTS := -c requirements/constraints.txt

# the repository's own Python packages (installed editable); native/ is built as a wheel
PACKAGES := packages/graphstrata $(filter-out packages/graphstrata,$(patsubst %/pyproject.toml,%,$(wildcard packages/*/pyproject.toml)))
NATIVE_SOURCES := $(shell find native -type f \( -name '*.h' -o -name '*.hpp' -o -name '*.cpp' -o -name '*.py' -o -name 'CMakeLists.txt' -o -name 'pyproject.toml' \) -not -path '*/build/*' 2>/dev/null)

export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install demo test test-fast bench lint clean

install: $(VENV)/.deps $(VENV)/.native $(VENV)/.packages

$(VENV)/.deps: requirements/dev.txt requirements/constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# CPU build of torch first: an unpinned torch resolves to a multi-GB CUDA build
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q $(CONSTRAINTS) -r requirements/dev.txt
	touch $@

$(VENV)/.native: $(VENV)/.deps $(NATIVE_SOURCES)
	$(PIP) install -q --force-reinstall --no-deps --no-build-isolation ./native
	touch $@

$(VENV)/.packages: $(VENV)/.deps $(VENV)/.native $(addsuffix /pyproject.toml,$(PACKAGES))
	$(PIP) install -q --no-deps --no-build-isolation $(foreach p,$(PACKAGES),-e $(p))
	touch $@

demo: install
	$(BIN)/python cookbook/demo.py

test: install
	$(BIN)/python -m pytest tests integration_tests

test-fast: install
	$(BIN)/python -m pytest tests -x -q

bench: install
	$(PIP) install -q -r requirements/bench.txt
	$(BIN)/python bench/bench_chnsw.py
	$(BIN)/python bench/bench_quality.py
	$(BIN)/python bench/bench_query.py

lint: install
	$(PIP) install -q ruff
	$(BIN)/ruff check packages tests integration_tests bench cookbook

clean:
	rm -rf $(VENV) native/build demo_index .pytest_cache
