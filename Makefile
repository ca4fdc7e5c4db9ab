# edgerun — every target sets the machine up first (scripts/setup.sh is
# idempotent and takes about a second once done), so `make demo` and `make test`
# work on a fresh Debian machine.
#
#   make demo        the embedded model answers arithmetic problems, cross-built for
#                    rpi5 under qemu cortex-a76 and natively, side by side
#   make test-boards edgerun test --board for BOARDS (default: rpi5 armv9-sve2)
#   make test-kernels-qemu  every Arm kernel table and layout against generic under qemu,
#                    cortex-a72 / cortex-a76 / SVE 128-2048 bits (scripts/test_kernels_qemu.sh)
#   make test-families-qemu  every model family's greedy tokens on every Arm table under
#                    qemu against native generic (tests/test_families_qemu.py)
#   make test-qemu   every test marked qemu: the families check and the real rpi5
#                    release chain (tests/test_release_board.py)
#   make kernel-insns  instructions each Arm table executes per matrix product under qemu,
#                    file layout vs repacked, and per activation row quantized, NEON vs
#                    generic (scripts/kernel_insns_qemu.sh)
#   make test        C unit tests, pytest, clang -Werror build, pip install check
#   make test-long   the slow tests (-m long)
#   make test-asan   C tests and the bad-input/CLI tests under ASan+UBSan
#   make test-tsan   the worker pool's C tests (threadpool, trace) under ThreadSanitizer
#   make fuzz        each libFuzzer harness for FUZZ_SECONDS (default 60)
#   make soak        10,000 generate requests: RSS growth (Python, C) and leaks (C under LeakSanitizer)
#   make bench-latency  per-token latency percentiles and first-request latency (scripts/bench_latency.py)
#   make soak-serve  2,000 requests through `edgerun serve`: 0 failed, server RSS growth <= 1 MB
#   make bench-batch batched decode: aggregate tok/s of 1, 2, 4 sessions in one step (scripts/bench_batch.py)
#   make bench-serve `edgerun serve` throughput at 1-4 slots and the burst test (scripts/bench_serve.py)
#   make test-tsan-swap  the live model swap stress test under ThreadSanitizer (clang)
#   make bench       edgerun vs llama.cpp: 15M/110M x F32/Q8_0/Q4_0/Q4_K (+110M: llama.cpp's Q4_1 ... Q6_K files) x 1,2 threads
#                    then Gemma-3-270M and Qwen3-0.6B shapes x Q8_0/Q4_K_M x 1,2 threads (then bench-qemu-isa)
#   make bench-qemu-isa  Arm kernel tables' speed-up over generic under qemu -> docs/PERFORMANCE.md
#   make bench-board BOARD=rpi5         the board's cross build under qemu: latency, gates (JSON + PNG)
#   make sysroot BOARD=rpi5             the board's aarch64 Python (python3 + cffi + numpy) in build/sysroot/
#   make test-device-python BOARD=rpi5  examples/device/*.py with that Python under qemu
#   make build       just build/native (libedgerun.so, edgerun-cli, C tests)
#   make build-cuda  build/cuda with the CUDA backend (-Dcuda=enabled; needs nvcc)
#   make gpu-check   on a GPU machine: CUDA build, C + pytest GPU tests, benchmark (scripts/gpu_check.sh)
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
                tests/test_shared_models.py tests/test_snapshot.py tests/test_trace.py)
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

.PHONY: all setup build test test-long test-asan clang-check demo bench bench-long clean distclean
.PHONY: demo-native test-boards
.PHONY: test-tsan-swap bench-tokenizer
.PHONY: test-tsan fuzz soak bench-latency bench-qemu-isa test-kernels-qemu kernel-insns test-families-qemu test-qemu

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
	@if [ -n "$(NVCC)" ]; then $(MAKE) --no-print-directory test-cuda; \
	else echo "test: nvcc not found, CUDA build checks skipped (install the CUDA toolkit to run them)"; fi

# The CUDA backend where nvcc exists but no GPU need: build/cuda compiles and
# links (the first build takes ~2.5 min on 2 cores, then it is incremental),
# its CUDA C tests run (the GPU ones skip without a device), and tests/test_cuda.py
# checks the device code (sm_87, sm_90, compute_90 PTX) and the no-GPU errors.
# setup.sh does not install CUDA: get the toolkit from NVIDIA's repositories
# (cuda-toolkit-13-0) or a JetPack for Jetson.
NVCC := $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
CUDA_BUILD := build/cuda
.PHONY: build-cuda test-cuda gpu-check
build-cuda: setup
	@[ -n "$(NVCC)" ] || { echo "build-cuda: nvcc not found; install the CUDA toolkit (13.x)"; exit 1; }
	PATH=$(dir $(NVCC)):$$PATH; $(call configure,$(CUDA_BUILD),gcc,$(MESON_OPTS) -Dcuda=enabled)
	PATH=$(dir $(NVCC)):$$PATH ninja -C $(CUDA_BUILD)

# (tests/test_cuda.py runs in the pytest step of `make test` and reuses build/cuda)
test-cuda: build-cuda
	$(MESON) test -C $(CUDA_BUILD) --print-errorlogs $$($(MESON) test -C $(CUDA_BUILD) --list 2>/dev/null | grep -o 'cuda[a-z_0-9]*' | sort -u)

# One prepared run on a GPU machine (see the script's header for the wheels
# it expects in .whl/): writes logs, JSON and the benchmark table to $$OUT.
gpu-check:
	bash scripts/gpu_check.sh

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

# Live model swap under ThreadSanitizer: workers generate while a swapper
# replaces the model every millisecond (runtime_c/tests/test_live_swap.c, the
# meson test live_swap_tsan, which exists only in a -Db_sanitize=thread build).
# clang does not link its sanitizer runtime into shared libraries, hence
# b_lundef=false; TSAN_WRAP (below) turns ASLR off where clang 14's TSan needs
# it. About 35 s on 2 cores from scratch, 6 s of it the test.
TSAN_SWAP := build/tsan-swap
TSAN_SWAP_MESON_OPTS := $(MESON_OPTS) -Dbuildtype=debugoptimized -Db_sanitize=thread -Db_lundef=false
test-tsan-swap: setup
	$(call configure,$(TSAN_SWAP),clang,$(TSAN_SWAP_MESON_OPTS))
	ninja -C $(TSAN_SWAP) runtime_c/tests/test_live_swap
	$(MESON) test -C $(TSAN_SWAP) --no-rebuild --print-errorlogs $(TSAN_WRAP) live_swap_tsan

# The C tests that drive the worker pool with 2+ threads, under
# ThreadSanitizer: test_threadpool (thousands of tiny dispatches, dynamic
# chunks, two sessions decoding at once while a third thread reads the trace)
# and test_trace (workers recording into the ring). The snapshot test stays
# out: its power-cut timing is calibrated for native speed. ASLR is switched
# off for the run where the kernel allows it, because the TSan runtime of
# clang 14 cannot place its shadow memory under the 32-bit mmap
# randomisation of recent kernels. About 2 minutes on 2 cores.
TSAN := build/tsan
TSAN_C_TESTS ?= threadpool trace
TSAN_MESON_OPTS := $(MESON_OPTS) -Dbuildtype=debugoptimized -Db_sanitize=thread -Db_lundef=false
TSAN_WRAP = $(shell setarch $$(uname -m) -R true >/dev/null 2>&1 && echo "--wrapper='setarch $$(uname -m) -R'")
test-tsan: setup
	$(call configure,$(TSAN),clang,$(TSAN_MESON_OPTS))
	ninja -C $(TSAN) $(addprefix runtime_c/tests/test_,$(TSAN_C_TESTS))
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
	  $(MESON) test -C $(TSAN) --no-rebuild --print-errorlogs $(TSAN_WRAP) $(TSAN_C_TESTS)

# libFuzzer harnesses (runtime_c/tests/fuzz_*.c), each for FUZZ_SECONDS, in
# $(FUZZ_BUILD); scripts/fuzz.sh says what to do with a crash.
FUZZ_SECONDS ?= 60
FUZZ_BUILD ?= $(ROOT)/build/fuzz
fuzz: setup
	MESON="$(MESON)" FUZZ_BUILD=$(FUZZ_BUILD) bash scripts/fuzz.sh $(FUZZ_SECONDS)

# Soak: SOAK_REQUESTS generate requests through the C API (RSS and open
# descriptors must not creep) and through Python (tests/test_soak.py -m long),
# then the C driver again in the ASan build with LeakSanitizer on: zero leaks.
# (500 Python and 300 C requests run in `make test` already.)
SOAK_REQUESTS ?= 10000
soak: build
	$(NATIVE)/runtime_c/tests/test_soak models/edgerun-add.gguf $(SOAK_REQUESTS)
	$(call PYENV,$(NATIVE)) $(PY) -m pytest -m long -s tests/test_soak.py $(PYTEST_ARGS)
	$(call configure,$(ASAN),gcc,$(ASAN_MESON_OPTS))
	ninja -C $(ASAN) runtime_c/tests/test_soak
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  $(ASAN)/runtime_c/tests/test_soak models/edgerun-add.gguf $(SOAK_REQUESTS)

# Latency stability, reported (docs/PERFORMANCE.md): p50/p90/p99/max of
# per-token latency over 1,000 tokens and the first request after open
# against the steady p99, on the embedded model and, when `make bench` has
# made it, the 15M-parameter one. Run it on an idle machine.
LATENCY_MODELS := models/edgerun-add.gguf $(BENCH_DIR)/llama15m-q8_0.gguf
bench-latency: build
	@for m in $(LATENCY_MODELS); do \
	  if [ ! -f $$m ]; then echo "bench-latency: $$m is missing (make bench makes it), skipped"; continue; fi; \
	  for t in 1 2; do $(call PYENV,$(NATIVE)) $(PY) scripts/bench_latency.py $$m --threads $$t; echo; done; \
	done

# The embedded model on a board build: cross-built for DEMO_BOARD (build/rpi5)
# and run under qemu-aarch64 with the board's CPU model (cortex-a76), next to
# the same model on this machine's build (build/host): answers, accuracy and a
# latency table side by side (scripts/demo_board.py). setup installs the cross
# compiler and qemu-user; `make demo-native` is the Python-API demo alone.
DEMO_BOARD ?= rpi5
demo: setup
	PYTHONPATH=$(ROOT)/pybind $(PY) scripts/demo_board.py --board $(DEMO_BOARD)

demo-native: build
	$(call PYENV,$(NATIVE)) $(PY) scripts/demo.py

# The board driver on the boards CI proves: for each, `edgerun build --board B`
# and `edgerun test --board B` (C tests and model checks under qemu-user on every
# CPU model the board lists; SVE boards at 128, 256 and 512 bits). The host
# build (build/host) is the logits reference. ci/github-actions.yml runs the
# same command per board.
BOARDS ?= rpi5 armv9-sve2
# The kernel tests alone (test_kernels_isa, test_repack_arm), statically
# cross-built, on every CPU model the Arm tables target, SVE up to 2048 bits
# (the board tests stop at the board's own lengths). About 5 minutes on 2 cores.
test-kernels-qemu: setup
	sh scripts/test_kernels_qemu.sh

# Every model family's greedy tokens on every Arm table (neon, neon-dotprod,
# neon-i8mm, SVE 128/256) under qemu against native generic, on tiny seeded
# family files (tests/test_families_qemu.py, marker qemu), with the
# armv9-sve2 board build that test-boards makes (built here if absent).
# About 2 minutes on 2 cores once that build exists.
test-families-qemu: build
	$(call PYENV,$(NATIVE)) $(PY) -m pytest -m qemu tests/test_families_qemu.py $(PYTEST_ARGS)

# Every test marked qemu: the families check above, and `edgerun release
# --board rpi5` with its real steps (cross build, `test` under qemu, the bench
# gates, package, publish, a device pulling it; tests/test_release_board.py).
# Run by .ci/run after test-boards, whose rpi5 and armv9-sve2 builds they
# reuse: about 5 minutes on 2 cores then (8 more where the builds are absent).
# Kept out of `make test` so that it stays well under 25 minutes.
test-qemu: build
	$(call PYENV,$(NATIVE)) $(PY) -m pytest -m qemu $(PYTEST_ARGS)

# Instructions executed per 64 x 2048 matrix product, each Arm table, file
# layout against repacked, decode and prefill (a markdown table): the work a
# kernel change saves, counted without Arm hardware. About 3 minutes.
kernel-insns: setup
	sh scripts/kernel_insns_qemu.sh

test-boards: setup
	@status=0; for b in $(BOARDS); do \
	  echo "== edgerun test --board $$b"; \
	  PYTHONPATH=$(ROOT)/pybind $(PY) -m edgerun test --board $$b || status=1; \
	done; exit $$status

$(BENCH_DIR)/llama15m-%.gguf: scripts/make_bench_model.py
	$(PY) scripts/make_bench_model.py $@ --type $*

# The matrix (bench.matrix): 15M and 110M shapes x F32/Q8_0/Q4_0/Q4_K (and on
# 110M the files llama.cpp's quantizer makes: Q4_1 Q5_0 Q5_1 IQ4_NL IQ4_XS
# Q2_K Q3_K_S/M/L Q4_K_S/M Q5_K_S/M Q6_K) x 1 and 2 threads, both engines,
# read bandwidth in the same run; writes docs/PERFORMANCE.md,
# docs/performance.png and $(BENCH_DIR)/matrix.json.
# ~15-25 min on 2 cores (the first run also makes the models);
# BENCH_QUICK=1 runs the 15M shape only; BENCH_TYPES=q4_1,iq4_xs only those
# types. Then the real families' shapes (scripts/make_bench_family.py:
# Gemma-3-270M and Qwen3-0.6B, seeded weights, `edgerun convert` then
# llama.cpp's quantizer, Q8_0 and Q4_K_M; made once, a few minutes, into
# $(BENCH_DIR)) into their own section and $(BENCH_DIR)/families.json
# (not with BENCH_QUICK=1). Then the embedded model, as before, and the
# footprint (edgerun bench --footprint): the stripped aarch64 edgerun-cli of
# the rpi5 build (budget 1 MB) and the host's libedgerun.so/edgerun-cli beside
# llama.cpp's libraries as llama-cpp-python ships them, stripped alike.
BENCH_QUICK ?= 0
BENCH_TYPES ?=
bench: build
	EDGERUN_SETUP_BENCH=1 bash scripts/setup.sh
	$(EDGERUN) bench --matrix $(if $(filter 1,$(BENCH_QUICK)),--quick) --threads $(BENCH_THREADS) \
	  $(if $(BENCH_TYPES),--types $(BENCH_TYPES)) --bench-dir $(BENCH_DIR) --doc docs/PERFORMANCE.md
	@if [ "$(BENCH_QUICK)" != 1 ]; then echo; $(EDGERUN) bench --matrix --families --threads $(BENCH_THREADS) \
	  --bench-dir $(BENCH_DIR) --doc docs/PERFORMANCE.md; fi
	@echo; $(EDGERUN) bench models/edgerun-add.gguf --threads $(BENCH_THREADS) --out $(BENCH_DIR)/edgerun-add.json
	@echo; $(EDGERUN) bench --footprint --out $(BENCH_DIR)/footprint.json
	@echo; $(EDGERUN) bench-tokenizer --mb 10
	@echo; $(MAKE) --no-print-directory bench-qemu-isa
	@echo; $(MAKE) --no-print-directory bench-serve
	@echo; $(MAKE) --no-print-directory bench-batch

# `edgerun serve` on the 110M shape (Q4_0, n_ctx 1024), in-process on loopback
# (scripts/bench_serve.py): aggregate tokens/s of 1, 2 and 4 streaming clients,
# then the burst test -- 3 clients generate while a 1,000-token prompt arrives
# every 10 s -- with the prompt's chunks held to 0.5 of the decode work per step
# and not held (100): the clients' per-token p99 during the bursts over the baseline.
# Then the same workload against llama.cpp's server (llama-cpp-python's
# `python -m llama_cpp.server`, from setup's bench group), side by side; its
# column is skipped when the server extra is not installed (--no-peer in
# SERVE_BENCH_ARGS skips it). ~7 min on 2 cores; writes $(BENCH_DIR)/serve.json.
SERVE_MODEL := $(BENCH_DIR)/llama110m-q4_0.gguf
SERVE_BENCH_ARGS ?= --threads 1 --prefill-share 0.5 100
.PHONY: bench-serve soak-serve
bench-serve: build
	test -f $(SERVE_MODEL) || $(PY) scripts/make_bench_model.py $(SERVE_MODEL) --type q4_0 --shape 110m
	$(call PYENV,$(NATIVE)) $(PY) scripts/bench_serve.py $(SERVE_MODEL) $(SERVE_BENCH_ARGS) --json $(BENCH_DIR)/serve.json

# Batched decode (er_decode_batch, scripts/bench_batch.py): aggregate decode
# tokens/s of 1, 2 and 4 sessions stepped together on the 110M Q4_0 shape, at
# 1 and 2 threads, against one session alone (goal: 4 slots >= 3x one). ~2 min.
.PHONY: bench-batch
bench-batch: build
	test -f $(SERVE_MODEL) || $(PY) scripts/make_bench_model.py $(SERVE_MODEL) --type q4_0 --shape 110m
	$(call PYENV,$(NATIVE)) $(PY) scripts/bench_batch.py $(SERVE_MODEL) --threads 1 2 --json $(BENCH_DIR)/batch.json

# The server's soak (tests/test_serve_soak.py, also in `make test-long`):
# 2,000 requests through the openai client, 0 failed, RSS growth <= 1 MB.
soak-serve: build
	$(call PYENV,$(NATIVE)) $(PY) -m pytest -m long -s tests/test_serve_soak.py $(PYTEST_ARGS)

# Long contexts (not in the matrix above): a grouped-query model (the 110M shape
# with 12 query heads on 4 K/V heads, scripts/make_bench_model.py --shape
# 110m-gqa, Q4_0) with a 1,536-token prompt and 128 decode steps, both engines,
# BENCH_THREADS; attention is half the work there. ~6 min on 2 cores.
LONG_MODEL := $(BENCH_DIR)/llama110m-gqa-q4_0.gguf
bench-long: build
	EDGERUN_SETUP_BENCH=1 bash scripts/setup.sh
	test -f $(LONG_MODEL) || $(PY) scripts/make_bench_model.py $(LONG_MODEL) --type q4_0 --shape 110m-gqa
	$(EDGERUN) bench $(LONG_MODEL) --prompt-tokens 1536 --gen-tokens 128 --ctx 2048 --threads $(BENCH_THREADS) \
	  --repeat 3 --out $(BENCH_DIR)/long.json

# The Arm kernel tables' speed-up over generic under qemu-aarch64 (bench_isa.py):
# a plain Armv8.0-A cross build (build/armv8-a) runs the 15M models on
# cortex-a72, cortex-a76 and SVE at 128/256/512 bits, each table forced,
# greedy tokens checked against generic's; writes $(BENCH_DIR)/qemu_isa.json
# and its section of docs/PERFORMANCE.md. ~5 min on 2 cores; BENCH_QUICK=1:
# Q8_0 on cortex-a76 and SVE-128 only.
bench-qemu-isa: setup
	$(EDGERUN) bench --qemu-isa $(if $(filter 1,$(BENCH_QUICK)),--quick) --bench-dir $(BENCH_DIR) \
	  --doc docs/PERFORMANCE.md

# Tokenizer MB/s (10 MB of mixed text) beside HF tokenizers and tiktoken, exactness
# checked on every document first; docs/TOKENIZER_BENCH.md has the method.
bench-tokenizer: build
	EDGERUN_SETUP_BENCH=1 bash scripts/setup.sh
	$(EDGERUN) bench-tokenizer --mb 10

clean:
	rm -rf build dist .pytest_cache .hypothesis
	find . -path ./.venv -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf .venv

# The board driver's on-device side: `edgerun bench --board` (board_bench.py),
# `edgerun sysroot` (sysroot.py) and the control scripts in examples/device/
# under the board's own Python (device_python.py). Each builds build/$(BOARD)/
# when needed; the sysroot needs deb.debian.org and PyPI the first time.
# BENCH_BOARD_ARGS: e.g. --update-baseline (rewrites benchmarks/baselines/$(BOARD).json).
BOARD ?= rpi5
BENCH_BOARD_ARGS ?=
.PHONY: bench-board sysroot test-device-python
bench-board: setup
	$(EDGERUN) bench --board $(BOARD) $(BENCH_BOARD_ARGS)

sysroot: setup
	$(EDGERUN) sysroot --board $(BOARD)

test-device-python: setup
	$(EDGERUN) test --board $(BOARD) --python
