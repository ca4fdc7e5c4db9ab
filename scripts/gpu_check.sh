#!/usr/bin/env bash
# gpu_check.sh — `make gpu-check`: the CUDA backend on a GPU machine, in one run
# (< 8 minutes on an H200): build with -Dcuda=enabled, the C tests, the GPU
# pytest subset, then the benchmark; logs and JSON in $OUT (or build/gpu-check);
# a summary at the end. Exit status: 0 when everything passed.
#
# The GPU machine this is written for: x86-64, CUDA 13 driver (and nvcc, or a
# carried build/cuda made where nvcc is), python3.12 with meson, ninja, numpy,
# pytest, torch, transformers — but no cffi and no gguf. Their wheels travel in
# .whl/ (never committed); fetch them on a connected machine with:
#
#   python3 -m pip download --dest .whl --only-binary=:all: --python-version 3.12 \
#       --implementation cp --abi cp312 --platform manylinux2014_x86_64 \
#       --platform manylinux_2_17_x86_64 cffi pycparser gguf
#
# (gguf is pure Python; its own needs — numpy, pyyaml, tqdm, requests — come
# with transformers.) This script installs them with
#   python3 -m pip install --no-index --no-deps --target /tmp/site .whl/*.whl
# Where the GPU machine has no nvcc, run `make build-cuda` on one that has and
# carry build/cuda along (~40 MB); the script then uses it as it is.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/build/gpu-check}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
BUILD=${CUDA_BUILD:-build/cuda}
T0=$(date +%s)
declare -a RESULTS=()
status=0
note() { RESULTS+=("$1"); echo "== $1"; }
step() {   # step NAME TIMEOUT_S CMD...: runs CMD with its output in $OUT/NAME.log
    local name=$1 limit=$2; shift 2
    local t=$(date +%s)
    timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
    local rc=$?
    local dt=$(( $(date +%s) - t ))
    if [ $rc -eq 0 ]; then note "PASS $name (${dt}s)"; elif [ $rc -eq 77 ]; then note "SKIP $name (${dt}s)";
    else note "FAIL $name (exit $rc, ${dt}s; $OUT/$name.log)"; tail -25 "$OUT/$name.log"; status=1; fi
    return $rc
}

{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; } >"$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"

# Python packages the machine lacks (cffi, gguf), from carried wheels
SITE=/tmp/site
if compgen -G ".whl/*.whl" >/dev/null; then
    $PY -m pip install --quiet --no-index --no-deps --target "$SITE" .whl/*.whl >"$OUT/wheels.log" 2>&1 \
        && note "PASS wheels ($(ls .whl/*.whl | wc -l) from .whl/)" || { note "FAIL wheels"; status=1; }
fi
export PYTHONPATH=$ROOT/pybind:$SITE${PYTHONPATH:+:$PYTHONPATH}

# Build (nvcc here), or use a build/cuda carried from a machine with nvcc
NVCC=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
if [ -n "$NVCC" ]; then
    export PATH=$(dirname "$NVCC"):$PATH
    if [ ! -f "$BUILD/build.ninja" ]; then
        step configure 120 $PY -m mesonbuild.mesonmain setup "$BUILD" -Dpython=false -Dcuda=enabled
    fi
    step build 300 ninja -C "$BUILD"
elif [ -f "$BUILD/runtime_c/libedgerun.so" ]; then
    note "PASS build (no nvcc here: using the carried $BUILD)"
else
    note "FAIL build (no nvcc and no carried $BUILD)"; status=1
fi
LIB=$ROOT/$BUILD/runtime_c/libedgerun.so
export EDGERUN_LIB=$LIB EDGERUN_CLI=$ROOT/$BUILD/runtime_c/tools/edgerun-cli
MODEL=$ROOT/models/edgerun-add.gguf

# C tests: the CUDA ones, the kernels' own (tests/cuda/), and the CPU suite of this build
for t in "$BUILD"/runtime_c/tests/test_cuda_* "$BUILD"/runtime_c/tests/cuda/test_*; do
    [ -f "$t" ] && [ -x "$t" ] || continue
    step "c-$(basename "$t")" 180 "$t" "$MODEL"
done
for t in no_alloc snapshot live_swap api_hardening; do
    [ -x "$BUILD/runtime_c/tests/test_$t" ] && step "c-cpu-$t" 120 "$BUILD/runtime_c/tests/test_$t" "$MODEL"
done

# pytest: the GPU subset (and the no-GPU checks, which must now skip or pass)
GPU_TESTS=$(ls tests/test_cuda*.py 2>/dev/null | tr '\n' ' ')
step pytest-gpu 300 $PY -m pytest -q -p no:cacheprovider $GPU_TESTS

# benchmark (edgerun + llama.cpp where installed): JSON + markdown into $OUT
step bench 240 $PY scripts/bench_cuda.py --bench-dir build/bench --membw "$BUILD/runtime_c/edgerun-cuda-membw" \
    --out "$OUT/bench_cuda.json" --doc "$OUT/PERFORMANCE_CUDA.md" --repeat 3
[ -f "$OUT/PERFORMANCE_CUDA.md" ] && cat "$OUT/PERFORMANCE_CUDA.md"

echo
echo "== gpu-check summary ($(( $(date +%s) - T0 ))s; logs in $OUT)"
printf '  %s\n' "${RESULTS[@]}"
exit $status
