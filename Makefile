# edgerun — every target sets the machine up first (scripts/setup.sh is
# idempotent and takes about a second once done), so `make demo` and `make test`
# work on a fresh Debian machine.
#
#   make demo        the embedded model answers arithmetic problems
#   make test        C unit tests, pytest, clang -Werror build, pip install check
#   make test-long   the slow tests (-m long)
#   make test-asan   C tests and the bad-input/CLI tests under ASan+UBSan
#   make bench       edgerun vs llama.cpp on the embedded and a 15M model
#   make build       just build/native (libedgerun.so, edgerun-cli, C tests)
#   make clean       remove build/ (keeps .venv); `make distclean` removes .venv too

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
ROOT := $(CURDIR)
space := $(subst ,, )
VENV := $(ROOT)/.venv
PY := $(VENV)/bin/python
# The venv's tools come first on PATH. meson runs through the venv's Python:
# that picks the pip meson (>= 1.1) even where Debian 12's older meson sits in
# /usr/bin, and it works whether pip installed meson into the venv or found it
# system-wide (--system-site-packages).
export PATH := $(VENV)/bin:$(PATH)
MESON := $(PY) -m mesonbuild.mesonmain

NATIVE := build/native
ASAN := build/asan
CLANG := build/clang
# The build trees never install the Python package (pip install . does), so
# they do not depend on the pybind meson files.
MESON_OPTS := -Dpython=false

# Tests import the package from the checkout and the library from the build tree.
PYENV = PYTHONPATH=$(ROOT)/pybind EDGERUN_LIB=$(ROOT)/$(1)/runtime_c/libedgerun.so \
        EDGERUN_CLI=$(ROOT)/$(1)/runtime_c/tools/edgerun-cli
PYTEST_ARGS ?=
EDGERUN = $(call PYENV,$(NATIVE)) $(PY) -m edgerun

# Under ASan, the Python tests that drive the C code with hostile or unusual
# input: malformed GGUF files, both CLIs, the Python API, the tokenizers, the
# models in ../shared/data. (The transformers conformance suite and the pip
# install check add no C paths and would only slow the sanitizer run.)
ASAN_TESTS ?= $(wildcard tests/test_bad_input*.py tests/test_native_cli.py tests/test_cli.py \
                tests/test_python_api.py tests/test_default_model.py tests/test_tokenizer_*.py \
                tests/test_shared_models.py)
# (a variable, because a comma inside $(call ...) would split the argument)
ASAN_MESON_OPTS := $(MESON_OPTS) -Dbuildtype=debugoptimized -Db_sanitize=address,undefined \
                   -Dc_args=-fno-sanitize-recover=all
# C tests that replace malloc/free themselves (allocation counting, failure
# injection) cannot share the process with ASan's allocator; they run in the
# native build.
ASAN_SKIP_C_TESTS ?= no_alloc failinject
ASAN_LIB = $(shell gcc -print-file-name=libasan.so)
SAN_ENV = ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1

BENCH_DIR := build/bench
BENCH_THREADS ?= 1,2
BENCH_MODELS := models/edgerun-add.gguf $(BENCH_DIR)/llama15m-f32.gguf $(BENCH_DIR)/llama15m-q8_0.gguf

.PHONY: all setup build test test-long test-asan clang-check demo bench clean distclean

all: build

setup:
	bash scripts/setup.sh

# configure DIR CC OPTIONS...: meson setup with compiler CC, or --reconfigure
# when DIR is configured (meson keeps its compiler), so a changed option takes
# effect; a half-written DIR from an interrupted run is started over.
define configure
	if [ -f $(1)/build.ninja ]; then $(MESON) setup --reconfigure $(1) $(3) >/dev/null; \
	else rm -rf $(1) && CC=$(2) $(MESON) setup $(1) $(3); fi
endef

build: setup
	$(call configure,$(NATIVE),gcc,$(MESON_OPTS))
	ninja -C $(NATIVE)

# A second compiler keeps the "warning-free with gcc and clang" promise under
# test: werror is on for the whole project.
clang-check: setup
	$(call configure,$(CLANG),clang,$(MESON_OPTS))
	ninja -C $(CLANG)

test: build clang-check
	$(MESON) test -C $(NATIVE) --print-errorlogs
	$(call PYENV,$(NATIVE)) $(PY) -m pytest $(PYTEST_ARGS)

test-long: build
	$(call PYENV,$(NATIVE)) $(PY) -m pytest -m long $(PYTEST_ARGS)

test-asan: setup
	$(call configure,$(ASAN),gcc,$(ASAN_MESON_OPTS))
	ninja -C $(ASAN)
	tests="$$($(MESON) test -C $(ASAN) --list 2>/dev/null | grep -v -x -E '[^:]*:($(subst $(space),|,$(strip $(ASAN_SKIP_C_TESTS))))')"; \
	ASAN_OPTIONS=abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  $(MESON) test -C $(ASAN) --print-errorlogs $$tests
	@if [ -n "$(ASAN_TESTS)" ]; then \
	  echo "pytest under ASan+UBSan: $(ASAN_TESTS)"; \
	  $(call PYENV,$(ASAN)) $(SAN_ENV) LD_PRELOAD=$(ASAN_LIB) $(PY) -m pytest -p no:cacheprovider $(ASAN_TESTS) $(PYTEST_ARGS); \
	else echo "test-asan: no Python bad-input tests found"; fi

demo: build
	$(call PYENV,$(NATIVE)) $(PY) scripts/demo.py

$(BENCH_DIR)/llama15m-%.gguf: scripts/make_bench_model.py
	$(PY) scripts/make_bench_model.py $@ --type $*

bench: build
	EDGERUN_SETUP_BENCH=1 bash scripts/setup.sh
	$(MAKE) --no-print-directory $(BENCH_DIR)/llama15m-f32.gguf $(BENCH_DIR)/llama15m-q8_0.gguf
	@for m in $(BENCH_MODELS); do \
	  if [ ! -f $$m ]; then echo "bench: $$m is missing, skipped"; continue; fi; \
	  echo; $(EDGERUN) bench $$m --threads $(BENCH_THREADS) --out $(BENCH_DIR)/$$(basename $$m .gguf).json; \
	done

clean:
	rm -rf build dist .pytest_cache .hypothesis
	find . -path ./.venv -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf .venv
